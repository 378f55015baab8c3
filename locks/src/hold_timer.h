// Internal: the one timer thread of every lock backend's holds. A backend whose holds each have
// their own due time (the next renewal, the end of a fixed lease, the end of a hold's validity,
// its max_hold) gives the timer a pass: it goes through its holds, acts on those that are due and
// returns the earliest time any of them is due next; the thread sleeps until then (at most
// `max_sleep`). Written once so that every backend keeps the same promises (L5, L11): a hold is
// looked at when it is due, not on a service-wide period, and a new hold never waits past its
// due time. Users: the renewal watchdogs of Redlock and of the Redis client (every Redis lock),
// the Redis client's expiry thread, and the hold table's expiry thread (every other backend).
//
// The thread is woken early only when a hold registered meanwhile is due before its planned
// wake-up (hold_added), or when the backend has work that cannot wait (poke). An acquisition
// whose hold is due after the planned wake-up costs no thread wake-up (a futex call and a
// context switch, which the uncontended lock cycle's profile showed).
//
// Thread safety: every member may be called from any thread. The pass runs on the timer's
// thread with no lock of the timer held, so it may take the backend's own mutex, and the backend
// may call hold_added() or poke() under that mutex.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>

#include "hold_validity.h"
#include "lockstep/core/mutex.h"
#include "lockstep/core/thread_annotations.h"

namespace lockstep::locks_detail {

class HoldTimer {
public:
    // Acts on the holds due now; returns when the next one is due (SteadyTime::max(): none).
    using Pass = std::function<SteadyTime()>;
    // No periodic pass: the thread sleeps until a hold is due or it is woken.
    static constexpr std::chrono::milliseconds kNoMaxSleep = std::chrono::milliseconds::max();

    explicit HoldTimer(std::chrono::milliseconds max_sleep = std::chrono::seconds(1)) : max_sleep_(max_sleep) {}
    ~HoldTimer() { stop(); }
    HoldTimer(const HoldTimer&) = delete;
    HoldTimer& operator=(const HoldTimer&) = delete;

    // Starts the thread; the first pass runs at once.
    void start(Pass pass) EXCLUDES(mu_);
    // Keeps `pass` and starts the thread with the first hold_added() or poke(): a backend whose
    // holds may never have a due time (an in-memory hold) starts no thread for them.
    void start_lazily(Pass pass) EXCLUDES(mu_);
    // Ends the thread after its current pass (idempotent). The pass never runs after this returns,
    // and hold_added() / poke() start nothing after it.
    void stop() EXCLUDES(mu_);

    // A hold was registered where the pass finds it (after, never before: a pass that ran before
    // the registration would not have seen it), first due at `due`. Also for a hold whose due
    // time moved earlier (a disconnection shortened its validity). SteadyTime::max(): nothing.
    void hold_added(SteadyTime due) EXCLUDES(mu_);
    // Run a pass now.
    void poke() EXCLUDES(mu_);

    // Passes run so far (tests, diagnostics).
    std::uint64_t passes() const EXCLUDES(mu_);

private:
    void run() EXCLUDES(mu_);
    // Starts the thread of a lazy timer; true if it did (its first pass runs at once).
    bool start_if_lazy() REQUIRES(mu_);

    const std::chrono::milliseconds max_sleep_;
    Pass pass_;
    mutable Mutex mu_;
    CondVar wake_;
    bool stopping_ GUARDED_BY(mu_) = false;
    bool lazy_ GUARDED_BY(mu_) = false;         // start_lazily() ran and the thread is not started yet
    std::uint64_t pokes_ GUARDED_BY(mu_) = 0;   // requests for a pass since the thread looked
    bool planning_ GUARDED_BY(mu_) = true;      // a pass is running (it may have passed a new hold's slot)
    SteadyTime planned_ GUARDED_BY(mu_){};      // else: the thread sleeps until then
    std::uint64_t passes_ GUARDED_BY(mu_) = 0;
    std::thread thread_ GUARDED_BY(mu_);
};

}  // namespace lockstep::locks_detail
