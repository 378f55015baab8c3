// Internal: the local gate of one lock name within one RedisLockClient (docs/locks.md "The local
// gate"). Threads of one process that want the same RedisMutex queue here, on a condition
// variable, instead of each joining the lock's Redis wait queue: only the gate's holder talks to
// Redis (its try, its wait for a turn), and it keeps the gate for its hold's whole life. So Redis
// sees at most one contender per process and name, and a hand-over between two threads of one
// process costs no publish, no wake-up message and no failed try ("contended ÷ one
// client").
//
// Fairness among the threads of one process follows the rule the Redis queue follows between
// processes (LockClientOptions::handoff_after, Go's sync.Mutex starvation mode): barging while
// waits are short (a thread that finds the gate free takes it, even past sleeping waiters, and a
// leave() only wakes the oldest waiter to compete), a direct hand-over to the oldest waiter once
// it has waited handoff_after (the gate never becomes free in between, so nobody can barge).
// The gate's threshold is LockClientOptions::local_handoff_after (250 µs, or handoff_after if
// shorter, unless set).
//
// Nothing here knows about Redis: tests/locks/local_gate_test.cpp drives it alone.
//
// Thread safety: all members may be called from any thread. leave() must be called once per
// Entered by whoever owns the passage (GatePass makes that exactly once).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "lockstep/core/mutex.h"

namespace lockstep {

class LocalGate {
public:
    using Clock = std::chrono::steady_clock;
    enum class Entry {
        Entered,   // the caller owns the gate until its leave()
        TimedOut,  // the deadline came (or no wait was allowed) while another thread had it
        Closed,    // close() ran: the client is being destroyed
    };

    explicit LocalGate(std::chrono::microseconds handoff_after) : handoff_after_(handoff_after) {}
    LocalGate(const LocalGate&) = delete;
    LocalGate& operator=(const LocalGate&) = delete;

    // deadline unset: no wait (TimedOut at once if taken). Clock::time_point::max(): no limit. A
    // free gate is taken even at or past the deadline (the caller then makes its one last try).
    // What a queued waiter may do every `every` while it waits: `probe` runs without the gate's
    // mutex, the waiter keeping its place. true: the caller got the lock by itself (its owner's
    // hold was lost: Redis is the truth), so it seizes the gate (see seize below).
    struct Probe {
        std::chrono::microseconds every{0};
        std::function<bool()> probe;
    };
    // `waits` (if given) is counted up when the caller queues, before it sleeps. `passage` (if
    // given) receives the passage number to hand to leave().
    Entry enter(std::optional<Clock::time_point> deadline, std::atomic<std::uint64_t>* waits = nullptr,
                std::uint64_t* passage = nullptr, const Probe* probe = nullptr) EXCLUDES(mutex_);
    // Gives the gate to the oldest waiter if it has waited handoff_after, else frees it and wakes
    // that waiter to compete. A passage that was seized meanwhile is over already: ignored.
    void leave(std::uint64_t passage) EXCLUDES(mutex_);
    // leave() of the current passage, whichever it is (unit tests with one known owner).
    void leave() EXCLUDES(mutex_) { leave(current_passage()); }
    std::uint64_t current_passage() const EXCLUDES(mutex_);
    // Every waiter, and every later enter(), gets Closed. The current owner keeps the gate until
    // its leave().
    void close() EXCLUDES(mutex_);

    // For tests and stats: threads waiting now, and whether someone owns the gate.
    std::size_t waiting() const EXCLUDES(mutex_);
    bool taken() const EXCLUDES(mutex_);

private:
    struct Waiter {
        CondVar cv;
        Clock::time_point since;
        bool granted = false;  // leave() handed the gate over: it never became free
        std::uint64_t passage = 0;  // set with granted
    };
    void remove(Waiter* w) REQUIRES(mutex_);

    const std::chrono::microseconds handoff_after_;
    mutable Mutex mutex_;
    bool taken_ GUARDED_BY(mutex_) = false;
    bool closed_ GUARDED_BY(mutex_) = false;
    // A leave() woke the oldest waiter to compete and it has not run yet: later leaves do not
    // wake it again (Go's mutexWoken), so a barging thread's cycles cost no futile wake-ups.
    bool wake_pending_ GUARDED_BY(mutex_) = false;
    // Numbers each passage; a seize starts a new one, so the seized owner's leave() is ignored.
    std::uint64_t passage_ GUARDED_BY(mutex_) = 0;
    std::deque<Waiter*> waiters_ GUARDED_BY(mutex_);  // arrival order
};

// One passage through a gate: leaves it when destroyed or reset, exactly once, however the
// acquisition ends (a timeout, a Redis error, an exception). Moved into the hold on success and
// out of it when the hold is forgotten.
class GatePass {
public:
    GatePass() = default;
    GatePass(LocalGate* gate, std::uint64_t passage) noexcept : gate_(gate), passage_(passage) {}
    GatePass(GatePass&& o) noexcept : gate_(std::exchange(o.gate_, nullptr)), passage_(o.passage_) {}
    GatePass& operator=(GatePass&& o) noexcept {
        if (this != &o) {
            reset();
            gate_ = std::exchange(o.gate_, nullptr);
            passage_ = o.passage_;
        }
        return *this;
    }
    GatePass(const GatePass&) = delete;
    GatePass& operator=(const GatePass&) = delete;
    ~GatePass() { reset(); }

    void reset() noexcept {
        if (LocalGate* g = std::exchange(gate_, nullptr)) g->leave(passage_);
    }
    explicit operator bool() const noexcept { return gate_ != nullptr; }

private:
    LocalGate* gate_ = nullptr;
    std::uint64_t passage_ = 0;
};

// The gates of one client, one per lock key. A lock object takes its gate once, at construction,
// so an acquisition does no lookup; lock objects of one name share it (the bench and most callers
// make one lock object per thread). Entries whose gate no lock object uses any more are dropped
// as the table grows.
class LocalGateTable {
public:
    explicit LocalGateTable(std::chrono::microseconds handoff_after) : handoff_after_(handoff_after) {}
    std::shared_ptr<LocalGate> get(const std::string& key) EXCLUDES(mutex_);
    // close() of every live gate, and of every gate made afterwards.
    void close_all() EXCLUDES(mutex_);
    std::size_t size() const EXCLUDES(mutex_);

private:
    const std::chrono::microseconds handoff_after_;
    mutable Mutex mutex_;
    bool closed_ GUARDED_BY(mutex_) = false;
    std::map<std::string, std::weak_ptr<LocalGate>> gates_ GUARDED_BY(mutex_);
    std::size_t sweep_at_ GUARDED_BY(mutex_) = 64;
};

}  // namespace lockstep
