// LogLimiter: caps how many debug and trace lines a part of the library writes per second, so
// that turning on debug for a hot path (a repository key, a contended lock) shows what happens
// without flooding the log or slowing the path down. Lines over the cap are dropped, not queued.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace lockstep {

class LogLimiter {
public:
    explicit LogLimiter(int per_second = 200) : per_second_(per_second) {}
    // True when one more line fits in the current second.
    bool allow() noexcept {
        const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
        auto window = window_.load(std::memory_order_relaxed);
        if (window != now && window_.compare_exchange_strong(window, now)) used_.store(0, std::memory_order_relaxed);
        return used_.fetch_add(1, std::memory_order_relaxed) < per_second_;
    }

private:
    const int per_second_;
    std::atomic<std::int64_t> window_{0};
    std::atomic<int> used_{0};
};

}  // namespace lockstep
