// Whether reads should try the cache now, and what a failed cache operation does: it is counted,
// logged (one warning a second at most, the rest at debug level), and after a connection error
// reads skip the cache for `cache_retry_after` (straight to the database, no fill) instead of
// paying a failing round trip each. Writes always try the cache: their deletes must land (C5).
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "lockstep/core/error.h"
#include "repository_stats.h"

namespace lockstep::detail {

class CacheHealth {
public:
    CacheHealth(std::string repository, std::chrono::milliseconds retry_after, RepositoryStats& stats)
        : repository_(std::move(repository)), retry_after_(retry_after), stats_(stats) {}

    // False while reads skip the cache after a connection error.
    bool usable() const;
    // Counts, logs (rate-limited), and for a connection error pauses cache use by reads.
    void failed(const Error& e, std::string_view during);

private:
    std::string repository_;
    std::chrono::milliseconds retry_after_;
    RepositoryStats& stats_;
    // Steady-clock nanoseconds until which reads skip the cache.
    std::atomic<std::int64_t> skip_until_{0};
    std::atomic<std::int64_t> next_warning_{0};
};

}  // namespace lockstep::detail
