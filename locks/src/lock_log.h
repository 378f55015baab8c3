// Internal: the lock layer's debug and trace lines, one format for every backend, so a stuck or
// slow lock can be followed at 3 a.m. with LOCKSTEP_LOG_LEVEL=debug (each line also carries the
// process id and thread from the logger's pattern, core/logging.h):
//
//   debug  lock 'product:42' [redis mutex]: acquire started
//   debug  lock 'product:42' [redis mutex]: granted after 12 ms, token 1043
//   debug  lock 'product:42' [redis mutex]: gave up after 500 ms
//   debug  lock 'product:42' [redis mutex]: released after holding 35 ms
//   trace  lock 'product:42' [redis mutex]: renewed, lease 30000 ms
//
// Losses and renewal failures are warnings, written where they are found (never rate-limited).
// Debug and trace lines share one limit of 200 a second (LogLimiter) across the lock layer.
#pragma once

#include <chrono>
#include <string_view>

#include "lockstep/core/log_limiter.h"
#include "lockstep/core/logging.h"

namespace lockstep::locks_detail {

inline LogLimiter& lock_log_limiter() {
    static LogLimiter limiter;
    return limiter;
}

// True when a line at `level` would be written now (checked before formatting anything).
inline bool lock_log_on(spdlog::level::level_enum level) {
    return logger()->should_log(level) && lock_log_limiter().allow();
}

inline long long elapsed_ms(std::chrono::steady_clock::time_point since) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - since).count();
}

// `what`: "redis mutex", "mysql mutex", "zookeeper read", ...
template <class... Args>
void lock_log(spdlog::level::level_enum level, std::string_view name, std::string_view what,
              fmt::format_string<Args...> event, Args&&... args) {
    if (!lock_log_on(level)) return;
    logger()->log(level, "lock '{}' [{}]: {}", name, what, fmt::format(event, std::forward<Args>(args)...));
}

}  // namespace lockstep::locks_detail
