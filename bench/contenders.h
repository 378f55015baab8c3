// Threads of this process contending for one lock name, each through its own lock object, with an
// empty critical section: the loop that the fairness row and the scale curve's waiters share.
// Inside the critical section (so every figure is ordered by the lock itself) each acquirer
// notes which thread held the lock before it and when that holder started to release it; the
// caller's `note` turns that into its own figures.
//
// Thread safety: run_contenders() starts and joins its threads; `note` runs on them, once per
// acquisition and inside the critical section, so calls for different `thread` indexes never
// overlap in time (the lock orders them) but come from different threads: keep per-thread state
// per index.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace lockstep::bench {

// One acquisition as seen inside the critical section.
struct ContenderTurn {
    std::chrono::steady_clock::time_point asked;  // the acquire call began
    std::chrono::steady_clock::time_point got;    // it returned with the lock
    int previous_holder = -1;                     // thread index of the previous hold; -1: none yet
    // When the previous holder started to release (steady clock, ns since its epoch); 0: none yet.
    std::int64_t previous_release_ns = 0;
};

inline std::int64_t steady_ns(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// `mutexes.size()` threads, thread t on *mutexes[t], sleep until `start`, then acquire, note and
// unlock until `end`. `acquire(m, end)` takes the lock (false: give up, the thread ends); `note(t,
// turn)` is called for each acquisition that returned by `end`. Returns the message of an
// exception that ended a thread ("" when none did).
template <class M, class Acquire, class Note>
std::string run_contenders(const std::vector<M*>& mutexes, std::chrono::steady_clock::time_point start,
                           std::chrono::steady_clock::time_point end, Acquire acquire, Note note) {
    using Clock = std::chrono::steady_clock;
    // Written only inside the critical section; atomics because the lock that orders them may
    // live in Redis, not in this process's memory model.
    std::atomic<int> last_holder{-1};
    std::atomic<std::int64_t> last_release_ns{0};
    std::mutex error_mutex;
    std::string error;
    std::vector<std::thread> pool;
    pool.reserve(mutexes.size());
    for (std::size_t t = 0; t < mutexes.size(); ++t) {
        pool.emplace_back([&, t] {
            M& m = *mutexes[t];
            const int me = static_cast<int>(t);
            try {
                std::this_thread::sleep_until(start);
                while (Clock::now() < end) {
                    ContenderTurn turn;
                    turn.asked = Clock::now();
                    if (!acquire(m, end)) break;
                    turn.got = Clock::now();
                    turn.previous_holder = last_holder.load();
                    turn.previous_release_ns = last_release_ns.load();
                    if (turn.got <= end) note(t, turn);
                    last_holder.store(me);
                    last_release_ns.store(steady_ns(Clock::now()));
                    m.unlock();
                }
            } catch (const std::exception& e) {
                std::lock_guard g(error_mutex);
                error = e.what();
            }
        });
    }
    for (auto& th : pool) th.join();
    return error;
}

}  // namespace lockstep::bench
