// Internal: the one thread of the process that ends JobLock holds at their deadlines. A JobLock
// keeps its hold past run_once (until at_least_for into the slot, at most until at_most_for
// after the acquisition), and the hold is a movable lockstep::Hold that any thread may release,
// so one thread can watch every JobLock's hold instead of a thread started and joined per run
// (that thread was most of a slot's cost: bench/bench_coordination.cpp, "job slot").
//
// The keeper sleeps until the earliest time a watched hold is due, and is woken early only when
// a hold is added or re-planned with an earlier due time, or poked (a hold was lost). A watched
// item's check() runs on the keeper's thread with no keeper lock held; it may release its hold
// there (one round trip, during which the other holds wait: their deadlines err late, never
// early).
//
// Thread safety: every member may be called from any thread. The keeper lives as long as the
// process (its thread is started on first use and never joined).
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "lockstep/core/mutex.h"

namespace lockstep::coordination_detail {

using SteadyTime = std::chrono::steady_clock::time_point;

class KeptHold {
public:
    virtual ~KeptHold() = default;
    // Acts on the hold if it is due at `now`; returns when it is next due (SteadyTime::max():
    // it has ended, the keeper forgets it).
    virtual SteadyTime check(SteadyTime now) = 0;
};

class JobHoldKeeper {
public:
    static JobHoldKeeper& instance();

    // Watches `hold` until its check() returns SteadyTime::max(); it is first due at `due`.
    void watch(std::shared_ptr<KeptHold> hold, SteadyTime due) EXCLUDES(mu_);
    // A watched hold is now due at `due` (earlier than before): wakes the thread if it planned
    // to sleep past it.
    void due_at(SteadyTime due) EXCLUDES(mu_);
    // `hold` has ended: stop watching it (an ended hold is otherwise dropped at its next due time).
    void forget(const KeptHold* hold) EXCLUDES(mu_);
    // Run a pass now (a hold was lost).
    void poke() EXCLUDES(mu_);

private:
    JobHoldKeeper();
    void run() EXCLUDES(mu_);
    void plan(SteadyTime due) REQUIRES(mu_);

    Mutex mu_;
    CondVar wake_;
    std::vector<std::shared_ptr<KeptHold>> holds_ GUARDED_BY(mu_);
    bool poked_ GUARDED_BY(mu_) = false;
    bool passing_ GUARDED_BY(mu_) = false;               // a pass is running
    SteadyTime earliest_added_ GUARDED_BY(mu_) = SteadyTime::max();  // due times given during a pass
    SteadyTime planned_ GUARDED_BY(mu_) = SteadyTime::max();         // else: the thread sleeps until then
};

}  // namespace lockstep::coordination_detail
