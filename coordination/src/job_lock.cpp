#include "lockstep/coordination/job_lock.h"

#include <algorithm>
#include <cstdio>
#include <random>

#include "lockstep/coordination/job_run_record.h"
#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"
#include "lockstep/core/names.h"
#include "job_hold_keeper.h"

namespace lockstep {

namespace {

using namespace std::chrono_literals;
using SystemTime = std::chrono::system_clock::time_point;
using SteadyTime = std::chrono::steady_clock::time_point;

constexpr std::string_view kRefused = "another node holds the job's lock";

// A name for a node that did not give one: unique enough for records and logs. The engine is
// seeded once per thread (a std::random_device is costly to open: it was the largest part of a
// JobLock's construction).
std::string random_owner() {
    thread_local std::mt19937_64 engine{[] {
        std::random_device rd;
        return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    }()};
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(engine()));
    return buf;
}

SteadyTime steady_at(SteadyTime anchor, SystemTime anchor_server, SystemTime server) {
    return anchor + std::chrono::duration_cast<std::chrono::steady_clock::duration>(server - anchor_server);
}

// The latest the server's clock can read at `now` (this node's steady clock), given a stamp it
// made after `sent`: the clocks' rates agree to 1%, 1 ms more for their resolutions.
SystemTime latest_server_time(SystemTime stamp, SteadyTime sent, SteadyTime now) {
    const auto elapsed = now - sent;
    return stamp +
           std::chrono::duration_cast<std::chrono::system_clock::duration>(elapsed + elapsed / 100 + 1ms);
}

}  // namespace

std::string_view to_string(JobOutcome o) noexcept {
    switch (o) {
    case JobOutcome::Skipped: return "skipped";
    case JobOutcome::Ran: return "ran";
    case JobOutcome::Failed: return "failed";
    case JobOutcome::Overran: return "overran";
    case JobOutcome::Lost: return "lost";
    }
    return "?";
}

void JobContext::record_run(Transaction& tx) const { JobRunRecord::record(tx, job_, slot_.index, token_, owner_, started_); }

// One run's hold: the movable Hold, its deadlines and the run's state, shared by run_once, the
// keeper thread (which ends it at its deadline) and the lock's loss callback.
struct JobLock::SlotHold final : coordination_detail::KeptHold {
    Mutex mu;
    CondVar changed;
    Hold held GUARDED_BY(mu);             // empty once released (or before it is handed over)
    bool ended GUARDED_BY(mu) = false;    // released: the next run may take the lock
    bool release_now GUARDED_BY(mu) = false;
    bool job_done GUARDED_BY(mu) = false;
    bool overran GUARDED_BY(mu) = false;
    SteadyTime hold_until GUARDED_BY(mu) = SteadyTime::max();
    SteadyTime cap GUARDED_BY(mu) = SteadyTime::max();
    const std::shared_ptr<std::atomic<bool>> lost = std::make_shared<std::atomic<bool>>(false);
    std::stop_source stop;

    // Releases `h` (never throws: a loss or a failed release is reported) and marks the end.
    void end_with(Hold h) EXCLUDES(mu) {
        if (h) h.release();
        coordination_detail::JobHoldKeeper::instance().forget(this);
        MutexLock g(mu);
        ended = true;
        changed.notify_all();
    }
    // Takes the hold out for release, or nothing if it was taken already.
    Hold take() EXCLUDES(mu) {
        MutexLock g(mu);
        return std::move(held);
    }

    SteadyTime check(SteadyTime now) override EXCLUDES(mu) {
        Hold out;
        bool stop_it = false;
        {
            MutexLock g(mu);
            if (!held) return SteadyTime::max();  // released by the run or by release()
            if (release_now || lost->load()) {
                out = std::move(held);
            } else if (now >= cap) {
                overran = stop_it = !job_done;
                out = std::move(held);
            } else if (job_done && now >= hold_until) {
                out = std::move(held);
            } else {
                return job_done ? hold_until : cap;
            }
        }
        if (stop_it) stop.request_stop();
        end_with(std::move(out));  // reports (never throws) a hold that was lost meanwhile
        return SteadyTime::max();
    }
};

// The mutex's loss callback is set once, when the JobLock makes its mutex; a loss belongs to the
// current run's hold (one at a time: a run waits for the last one's end before it acquires).
struct JobLock::LossTarget {
    Mutex mu;
    std::weak_ptr<SlotHold> hold GUARDED_BY(mu);
};

JobLock::JobLock(LockService& service, std::string job, JobSchedule schedule, JobLockOptions options)
    : service_(service), job_(std::move(job)), schedule_(std::move(schedule)), options_(std::move(options)),
      loss_target_(std::make_shared<LossTarget>()) {
    check_name("job name", job_);
    if (options_.lock_name.empty()) options_.lock_name = "job:" + job_;
    if (options_.owner.empty()) options_.owner = random_owner();
    if (options_.at_least_for && options_.at_most_for && *options_.at_most_for < *options_.at_least_for) {
        throw ConfigError("at_most_for", "must not be shorter than at_least_for");
    }
    if (options_.boundary_wait.count() < 0) throw ConfigError("boundary_wait", "must not be negative");
    LockOptions lo = options_.lock;
    lo.on_lost = [weak = std::weak_ptr<LossTarget>(loss_target_), user = options_.lock.on_lost](const LockLoss& loss) {
        if (auto target = weak.lock()) {
            std::shared_ptr<SlotHold> h;
            {
                MutexLock g(target->mu);
                h = target->hold.lock();
            }
            if (h) {
                h->lost->store(true);
                h->stop.request_stop();
                coordination_detail::JobHoldKeeper::instance().poke();  // it releases the lost hold
            }
        }
        if (user) user(loss);
    };
    mutex_ = service_.make_mutex(options_.lock_name, std::move(lo));
}

JobLock::~JobLock() { release(); }

void JobLock::await_last_hold() {
    std::shared_ptr<SlotHold> h;
    {
        MutexLock g(mu_);
        h = hold_;
    }
    if (!h) return;
    MutexLock g(h->mu);
    while (!h->ended) h->changed.wait(h->mu);
}

void JobLock::release() {
    std::shared_ptr<SlotHold> h;
    {
        MutexLock g(mu_);
        h = hold_;
    }
    if (h) {
        h->stop.request_stop();
        {
            MutexLock g(h->mu);
            h->release_now = true;  // a run that has not handed its hold over yet releases it
        }
        Hold out = h->take();
        if (out) h->end_with(std::move(out));
    }
    MutexLock r(run_mu_);  // a running job returns first (its stop was requested)
    await_last_hold();
}

void JobLock::request_stop() {
    MutexLock g(mu_);
    if (hold_) hold_->stop.request_stop();
}

// Invariants of every stage below: runs are serialised by run_mu_ (held throughout), and the
// run's SlotHold `h`, once made, is ended (end_with) on every path that does not hand the hold
// over to it, including every throw.

// What this node knows of its last run, copied out under mu_.
struct JobLock::LastRun {
    std::optional<std::int64_t> slot;  // the last slot this node ran
    SystemTime stamp;                  // the server's clock at its start, stamped after stamp_sent
    SteadyTime stamp_sent;
};

// The lock's grant, with this node's steady clock just before and just after the acquire.
struct JobLock::Grant {
    Hold held;
    SteadyTime sent;
    SteadyTime back;
};

// When a granted run started by the server's clock, and the deadlines that follow from it.
struct JobLock::RunStart {
    SystemTime started;
    SteadyTime stamp_sent;  // this node's steady clock before `started` was stamped
    SteadyTime anchor;      // this node's steady clock after it: deadlines err late, never early
    SystemTime at_least;
    SystemTime at_most;
};

JobRun JobLock::run_once(const std::function<void(JobContext&)>& job) {
    MutexLock serial(run_mu_);
    const LastRun last = last_run();
    JobRun r;
    std::optional<SystemTime> read_before;  // the server's clock, read before acquiring
    if (last.slot && skips_slot_already_run(last, r, read_before)) return r;
    await_last_hold();  // the last slot's hold ends at its own deadline, by this slot's start
    const std::shared_ptr<SlotHold> h = start_slot_hold();
    Grant grant = acquire_slot_lock(*h);
    if (!grant.held) {
        skip_refused_slot(*h, read_before, r);
        return r;
    }
    RunStart start;
    try {
        start = stamp_run_start(grant);
        decide_slot(grant.held, start, last, r);
    } catch (...) {
        h->end_with(std::move(grant.held));
        throw;
    }
    if (!r.skip_reason.empty()) {
        h->end_with(std::move(grant.held));
        return r;
    }
    hand_hold_over(*h, std::move(grant.held), start);
    remember_run(r.slot.index, start);
    coordination_detail::JobHoldKeeper::instance().watch(h, start_cap(start));
    if (h->lost->load()) coordination_detail::JobHoldKeeper::instance().poke();  // lost before it was watched
    run_job(*h, job, start.started, r);
    r.outcome = end_run(*h, r.error);
    return r;
}

std::chrono::milliseconds JobLock::local_clock_offset(SystemTime server) const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
        (options_.local_clock ? options_.local_clock() : std::chrono::system_clock::now()) - server);
}

JobLock::LastRun JobLock::last_run() {
    MutexLock g(mu_);
    return LastRun{last_slot_, last_stamp_, last_stamp_sent_};
}

// This node ran a slot: a timer that fires twice, or a loop that calls run_once more often than
// the slots change, skips it without asking the lock. The server's clock at the last run's start
// and this node's steady clock since tell it without a round trip while the latest the server's
// clock can read is still in that slot; else the clock is read (into `read_before`).
// REQUIRES: last.slot is set.
bool JobLock::skips_slot_already_run(const LastRun& last, JobRun& r, std::optional<SystemTime>& read_before) {
    const SteadyTime now = std::chrono::steady_clock::now();
    const SystemTime latest = latest_server_time(last.stamp, last.stamp_sent, now);
    if (schedule_.slot_at(latest).index <= *last.slot) {
        r.slot = schedule_.slot_at(latest);
        const auto since = std::chrono::duration_cast<std::chrono::system_clock::duration>(now - last.stamp_sent);
        r.local_clock_offset = local_clock_offset(last.stamp + since);
        r.skip_reason = "this node already ran the slot";
        return true;
    }
    read_before = service_.server_time();
    r.local_clock_offset = local_clock_offset(*read_before);
    r.slot = schedule_.slot_at(*read_before);
    if (r.slot.index <= *last.slot) {
        r.skip_reason = "this node already ran the slot";
        return true;
    }
    return false;
}

// The run's hold, made current for release() and for the mutex's loss callback.
std::shared_ptr<JobLock::SlotHold> JobLock::start_slot_hold() {
    auto h = std::make_shared<SlotHold>();
    {
        MutexLock g(mu_);
        hold_ = h;
    }
    {
        MutexLock g(loss_target_->mu);
        loss_target_->hold = h;
    }
    return h;
}

// Waits up to boundary_wait for the lock; ends `h` if the acquire throws.
JobLock::Grant JobLock::acquire_slot_lock(SlotHold& h) {
    Grant grant;
    grant.sent = std::chrono::steady_clock::now();
    try {
        grant.held = mutex_->try_acquire_for(options_.boundary_wait);
    } catch (...) {
        h.end_with(Hold{});
        throw;
    }
    grant.back = std::chrono::steady_clock::now();
    return grant;
}

// Another node holds the lock: ends `h` and reports the skip.
void JobLock::skip_refused_slot(SlotHold& h, const std::optional<SystemTime>& read_before, JobRun& r) {
    h.end_with(Hold{});
    if (!read_before) {
        // The slot skipped, for the report: the one the server's clock is in now.
        const SystemTime now = service_.server_time();
        r.local_clock_offset = local_clock_offset(now);
        r.slot = schedule_.slot_at(now);
    }
    r.skip_reason = std::string(kRefused);
}

// The slot is the one the server's clock is in once the lock is ours: a node that waited across a
// boundary runs the new slot, never the old one. The backend's own stamp of the grant (Redis: TIME
// in the acquire script) costs nothing; else the clock is read now.
JobLock::RunStart JobLock::stamp_run_start(const Grant& grant) {
    RunStart s;
    if (const auto granted = grant.held.server_time_at_grant()) {
        s.started = *granted;
        s.stamp_sent = grant.sent;
        s.anchor = grant.back;  // the stamp was made by then: deadlines err late, never early
    } else {
        s.stamp_sent = std::chrono::steady_clock::now();
        s.started = service_.server_time();
        s.anchor = std::chrono::steady_clock::now();  // after the reply: deadlines err late, never early
    }
    return s;
}

// Sets the run's slot and deadlines, and either its skip reason or its fencing token.
void JobLock::decide_slot(const Hold& held, RunStart& s, const LastRun& last, JobRun& r) {
    r.local_clock_offset = local_clock_offset(s.started);
    r.slot = schedule_.slot_at(s.started);
    // at_most_for counts from this acquisition (ShedLock's lockAtMostFor), so a node that takes
    // over a slot whose holder died or overran gets the whole allowance.
    s.at_most = options_.at_most_for ? s.started + *options_.at_most_for : r.slot.end;
    s.at_least = options_.at_least_for ? r.slot.start + *options_.at_least_for : r.slot.end;
    if (last.slot && r.slot.index <= *last.slot) {
        r.skip_reason = "this node already ran the slot";
    } else if (options_.run_record) {
        if (JobRunRecord::find(*options_.run_record, job_, r.slot.index)) r.skip_reason = "the slot has a run record";
    } else if (s.started >= s.at_least) {
        // Someone may have run the slot and released it at at_least_for (O4): too late to tell.
        r.skip_reason = "too late: past at_least_for into the slot";
    }
    if (r.skip_reason.empty()) r.token = held.fence_token();
}

SteadyTime JobLock::start_cap(const RunStart& s) { return steady_at(s.anchor, s.started, s.at_most); }

// Gives `held` and its deadlines to `h`, or releases it if release() came first (the job then
// runs with its stop requested).
void JobLock::hand_hold_over(SlotHold& h, Hold held, const RunStart& s) {
    {
        MutexLock g(h.mu);
        h.hold_until = steady_at(s.anchor, s.started, std::min(s.at_least, s.at_most));
        h.cap = start_cap(s);
        if (!h.release_now) h.held = std::move(held);
    }
    if (held) h.end_with(std::move(held));
}

void JobLock::remember_run(std::int64_t slot, const RunStart& s) {
    MutexLock g(mu_);
    last_slot_ = slot;
    last_stamp_ = s.started;
    last_stamp_sent_ = s.stamp_sent;
}

// Calls the job; what it throws goes to r.error.
void JobLock::run_job(SlotHold& h, const std::function<void(JobContext&)>& job, SystemTime started, JobRun& r) {
    JobContext ctx(job_, r.slot, r.token, options_.owner, started, h.stop.get_token(), h.lost);
    try {
        job(ctx);
    } catch (...) {
        r.error = std::current_exception();
    }
}

// Marks the job done: the hold is released here if at_least_for has passed, else the keeper
// releases it then. Returns the run's outcome.
JobOutcome JobLock::end_run(SlotHold& h, const std::exception_ptr& error) {
    bool overran = false;
    Hold done;
    SteadyTime keep_until = SteadyTime::max();
    {
        MutexLock g(h.mu);
        h.job_done = true;
        overran = h.overran;
        if (h.held) {
            if (std::chrono::steady_clock::now() >= h.hold_until) {
                done = std::move(h.held);  // nothing left to keep it for: release it here
            } else {
                keep_until = h.hold_until;
            }
        }
    }
    if (done) {
        h.end_with(std::move(done));
    } else if (keep_until != SteadyTime::max()) {
        coordination_detail::JobHoldKeeper::instance().due_at(keep_until);
    }
    return overran           ? JobOutcome::Overran
           : h.lost->load()  ? JobOutcome::Lost
           : error           ? JobOutcome::Failed
                             : JobOutcome::Ran;
}

}  // namespace lockstep
