// Internal: the watchdog thread of a backend whose holds each have their own due time — the next
// renewal, or the end of a fixed lease (LockOptions::renew = false) — used by Redlock and the
// fair Redis mutex. Written once so that both keep the same promises (L5): a hold is looked at
// when it is due, not on a service-wide period, and a new hold never waits past its due time.
//
// The backend's pass goes through its holds, acts on those that are due and returns the earliest
// time any of them is due next; the thread sleeps until then (at most `max_sleep`). It is woken
// early only when a hold registered meanwhile is due before that (hold_added), or when the
// backend has work that cannot wait (poke). An acquisition whose hold is due after the planned
// wake-up costs no thread wake-up (a futex call and a context switch, which the uncontended lock
// cycle's profile showed).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>

#include "hold_table.h"
#include "lockstep/core/mutex.h"
#include "lockstep/core/thread_annotations.h"

namespace lockstep::locks_detail {

class RenewalScheduler {
public:
    // Acts on the holds due now; returns when the next one is due (SteadyTime::max(): none).
    using Pass = std::function<SteadyTime()>;

    explicit RenewalScheduler(std::chrono::milliseconds max_sleep = std::chrono::seconds(1))
        : max_sleep_(max_sleep) {}
    ~RenewalScheduler() { stop(); }
    RenewalScheduler(const RenewalScheduler&) = delete;
    RenewalScheduler& operator=(const RenewalScheduler&) = delete;

    // Starts the thread; the first pass runs at once.
    void start(Pass pass) EXCLUDES(mu_);
    // Ends the thread after its current pass (idempotent). The pass never runs after this returns.
    void stop() EXCLUDES(mu_);

    // A hold was registered where the pass finds it (after, never before: a pass that ran before
    // the registration would not have seen it), first due at `due`.
    void hold_added(SteadyTime due) EXCLUDES(mu_);
    // Run a pass now.
    void poke() EXCLUDES(mu_);

    // Passes run so far (tests, diagnostics).
    std::uint64_t passes() const EXCLUDES(mu_);

private:
    void run() EXCLUDES(mu_);

    const std::chrono::milliseconds max_sleep_;
    Pass pass_;
    mutable Mutex mu_;
    CondVar wake_;
    bool stopping_ GUARDED_BY(mu_) = false;
    std::uint64_t pokes_ GUARDED_BY(mu_) = 0;   // requests for a pass since the thread looked
    bool planning_ GUARDED_BY(mu_) = true;      // a pass is running (it may have passed a new hold's slot)
    SteadyTime planned_ GUARDED_BY(mu_){};      // else: the thread sleeps until then
    std::uint64_t passes_ GUARDED_BY(mu_) = 0;
    std::thread thread_ GUARDED_BY(mu_);
};

}  // namespace lockstep::locks_detail
