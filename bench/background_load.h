// BackgroundLoad: `threads` busy-loop threads that run beside the benchmarks for the whole run
// (lockstep-bench --load N), so that a ratio judged on an idle machine can be read again with
// the CPUs contended. Each thread spins on arithmetic until the load is stopped; it runs at the
// bench's own nice value (set explicitly, not only inherited) and is pinned nowhere: the kernel
// places it as it places the benchmark's threads.
//
// Thread safety: construct, stop and read it from one thread (the run's main thread).
#pragma once

#include <ctime>

#include <atomic>
#include <thread>
#include <vector>

namespace lockstep::bench {

class BackgroundLoad {
public:
    // Starts `threads` busy threads (0: none).
    explicit BackgroundLoad(int threads);
    // Stops and joins them.
    ~BackgroundLoad();
    BackgroundLoad(const BackgroundLoad&) = delete;
    BackgroundLoad& operator=(const BackgroundLoad&) = delete;

    int threads() const noexcept { return static_cast<int>(pool_.size()); }
    // CPU seconds the busy threads have had so far (each thread's own CPU clock), while they
    // run; the difference over a window divided by its length is the cores they got.
    double cpu_seconds() const;
    // Stops and joins the threads. Idempotent.
    void stop();

private:
    std::atomic<bool> stopping_{false};
    std::vector<std::thread> pool_;
    std::vector<clockid_t> clocks_;  // one CPU clock per thread
};

}  // namespace lockstep::bench
