// CacheHealth: the pause after a connection error, and the rate-limited warning.
#include "cache_health.h"

#include "lockstep/core/logging.h"

namespace lockstep::detail {

namespace {
std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}
}  // namespace

bool CacheHealth::usable() const { return now_ns() >= skip_until_.load(std::memory_order_relaxed); }

void CacheHealth::failed(const Error& e, std::string_view during) {
    bump(stats_.c.cache_errors);
    if (dynamic_cast<const ConnectionError*>(&e) != nullptr && retry_after_.count() > 0) {
        skip_until_.store(now_ns() + std::chrono::nanoseconds(retry_after_).count(), std::memory_order_relaxed);
    }
    auto now = now_ns();
    auto next = next_warning_.load(std::memory_order_relaxed);
    if (now >= next && next_warning_.compare_exchange_strong(next, now + 1'000'000'000)) {
        logger()->warn("repository '{}': cache {} failed ({} cache errors so far): {}", repository_, during,
                       stats_.c.cache_errors.load(), e.what());
    } else {
        logger()->debug("repository '{}': cache {} failed: {}", repository_, during, e.what());
    }
}

}  // namespace lockstep::detail
