#include "background_load.h"

#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace lockstep::bench {

BackgroundLoad::BackgroundLoad(int threads) {
    // The nice value of the thread that starts the load (the bench's): each busy thread sets it on
    // itself, so the load competes with the benchmark as an equal, not at another priority.
    errno = 0;
    const int nice_value = ::getpriority(PRIO_PROCESS, 0);
    const bool have_nice = errno == 0;
    for (int i = 0; i < threads; ++i) {
        pool_.emplace_back([this, nice_value, have_nice] {
            if (have_nice) {
                const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
                ::setpriority(PRIO_PROCESS, tid, nice_value);
            }
            // Arithmetic the compiler cannot drop; the stop flag is read every 4096 steps.
            volatile unsigned long long sink = 0;
            unsigned long long x = 88172645463325252ULL;
            while (!stopping_.load(std::memory_order_relaxed)) {
                for (int k = 0; k < 4096; ++k) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                }
                sink = x;
            }
            (void)sink;
        });
        clockid_t clock{};
        if (::pthread_getcpuclockid(pool_.back().native_handle(), &clock) == 0) clocks_.push_back(clock);
    }
}

BackgroundLoad::~BackgroundLoad() {
    stop();
}

double BackgroundLoad::cpu_seconds() const {
    if (stopping_.load()) return 0;
    double total = 0;
    for (clockid_t c : clocks_) {
        timespec ts{};
        if (::clock_gettime(c, &ts) == 0) total += static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
    }
    return total;
}

void BackgroundLoad::stop() {
    if (stopping_.exchange(true)) return;
    for (auto& t : pool_) t.join();
}

}  // namespace lockstep::bench
