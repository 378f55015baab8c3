// TtlBounding: its options checked, and the capped, jittered TTL of every entry.
#include "lockstep/strategies/ttl_bounding.h"

#include <algorithm>
#include <random>

#include "lockstep/core/error.h"

namespace lockstep {

TtlBounding::TtlBounding(std::chrono::milliseconds max_ttl, std::chrono::milliseconds jitter)
    : max_ttl_(max_ttl), jitter_(jitter) {
    if (max_ttl.count() <= 0) throw ConfigError("TtlBounding.max_ttl", "must be positive");
    if (jitter.count() < 0 || jitter >= max_ttl) throw ConfigError("TtlBounding.jitter", "must be in [0, max_ttl)");
}

std::string TtlBounding::name() const {
    return "TtlBounding(" + std::to_string(max_ttl_.count()) + "ms, jitter " + std::to_string(jitter_.count()) + "ms)";
}

std::chrono::milliseconds TtlBounding::entry_ttl(std::chrono::milliseconds requested) const {
    auto cap = max_ttl_;
    if (jitter_.count() > 0) {
        thread_local std::mt19937_64 rng{std::random_device{}()};
        cap -= std::chrono::milliseconds(std::uniform_int_distribution<long long>(0, jitter_.count())(rng));
    }
    return std::min(requested, cap);
}

}  // namespace lockstep
