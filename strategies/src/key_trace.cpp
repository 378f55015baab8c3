// KeyTrace: the two rate limits.
#include "key_trace.h"

#include <chrono>

namespace lockstep::detail {

namespace {
std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}
}  // namespace

bool KeyTrace::allow() {
    const std::int64_t second = now_ns() / 1'000'000'000;
    auto window = window_.load(std::memory_order_relaxed);
    if (window != second && window_.compare_exchange_strong(window, second)) used_.store(0, std::memory_order_relaxed);
    return used_.fetch_add(1, std::memory_order_relaxed) < per_second;
}

bool KeyTrace::allow_warning() {
    const auto now = now_ns();
    auto next = next_warning_.load(std::memory_order_relaxed);
    return now >= next && next_warning_.compare_exchange_strong(next, now + 1'000'000'000);
}

}  // namespace lockstep::detail
