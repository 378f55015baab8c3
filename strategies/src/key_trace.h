// Debug lines that let an operator follow one key through the read and write paths (hit, miss,
// load, fill and why it was refused, invalidation, lock wait), at most 200 a second per
// repository so that turning debug on under load cannot flood the log; and the limit of one
// warning a second for a problem that repeats on every read or write.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

#include "lockstep/core/logging.h"

namespace lockstep::detail {

class KeyTrace {
public:
    explicit KeyTrace(std::string repository) : repository_(std::move(repository)) {}

    // A debug line about `key`, rate-limited. `what` is a fmt format string for `args`.
    template <class... Args>
    void operator()(const std::string& key, const char* what, Args&&... args) {
        if (!logger()->should_log(spdlog::level::debug) || !allow()) return;
        logger()->debug("repository '{}': {} {}", repository_, key,
                        fmt::format(fmt::runtime(what), std::forward<Args>(args)...));
    }
    // True at most once a second.
    bool allow_warning();

private:
    bool allow();

    static constexpr int per_second = 200;
    std::string repository_;
    std::atomic<std::int64_t> window_{0};
    std::atomic<int> used_{0};
    std::atomic<std::int64_t> next_warning_{0};
};

}  // namespace lockstep::detail
