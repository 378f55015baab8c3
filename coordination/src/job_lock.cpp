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

JobRun JobLock::run_once(const std::function<void(JobContext&)>& job) {
    MutexLock serial(run_mu_);
    std::optional<std::int64_t> last;
    SystemTime last_stamp;
    SteadyTime last_stamp_sent;
    {
        MutexLock g(mu_);
        last = last_slot_;
        last_stamp = last_stamp_;
        last_stamp_sent = last_stamp_sent_;
    }
    const auto local_offset = [&](SystemTime server) {
        return std::chrono::duration_cast<std::chrono::milliseconds>(
            (options_.local_clock ? options_.local_clock() : std::chrono::system_clock::now()) - server);
    };
    JobRun r;
    std::optional<SystemTime> read_before;  // the server's clock, read before acquiring
    if (last) {
        // This node ran a slot: a timer that fires twice, or a loop that calls run_once more often
        // than the slots change, skips it without asking the lock. The server's clock at the last
        // run's start and this node's steady clock since tell it without a round trip while the
        // latest the server's clock can read is still in that slot; else the clock is read.
        const SteadyTime now = std::chrono::steady_clock::now();
        const SystemTime latest = latest_server_time(last_stamp, last_stamp_sent, now);
        if (schedule_.slot_at(latest).index <= *last) {
            r.slot = schedule_.slot_at(latest);
            const auto since =
                std::chrono::duration_cast<std::chrono::system_clock::duration>(now - last_stamp_sent);
            r.local_clock_offset = local_offset(last_stamp + since);
            r.skip_reason = "this node already ran the slot";
            return r;
        }
        read_before = service_.server_time();
        r.local_clock_offset = local_offset(*read_before);
        r.slot = schedule_.slot_at(*read_before);
        if (r.slot.index <= *last) {
            r.skip_reason = "this node already ran the slot";
            return r;
        }
    }
    await_last_hold();  // the last slot's hold ends at its own deadline, by this slot's start
    auto h = std::make_shared<SlotHold>();
    {
        MutexLock g(mu_);
        hold_ = h;
    }
    {
        MutexLock g(loss_target_->mu);
        loss_target_->hold = h;
    }
    const SteadyTime acq_sent = std::chrono::steady_clock::now();
    Hold held;
    try {
        held = mutex_->try_acquire_for(options_.boundary_wait);
    } catch (...) {
        h->end_with(Hold{});
        throw;
    }
    const SteadyTime acq_back = std::chrono::steady_clock::now();
    if (!held) {
        h->end_with(Hold{});
        if (!read_before) {
            // The slot skipped, for the report: the one the server's clock is in now.
            const SystemTime now = service_.server_time();
            r.local_clock_offset = local_offset(now);
            r.slot = schedule_.slot_at(now);
        }
        r.skip_reason = std::string(kRefused);
        return r;
    }
    SystemTime started, at_least, at_most;
    SteadyTime anchor, stamp_sent;
    try {
        // The slot is the one the server's clock is in once the lock is ours: a node that waited
        // across a boundary runs the new slot, never the old one. The backend's own stamp of the
        // grant (Redis: TIME in the acquire script) costs nothing; else the clock is read now.
        if (const auto granted = held.server_time_at_grant()) {
            started = *granted;
            stamp_sent = acq_sent;
            anchor = acq_back;  // the stamp was made by then: deadlines err late, never early
        } else {
            stamp_sent = std::chrono::steady_clock::now();
            started = service_.server_time();
            anchor = std::chrono::steady_clock::now();  // after the reply: deadlines err late, never early
        }
        r.local_clock_offset = local_offset(started);
        r.slot = schedule_.slot_at(started);
        // at_most_for counts from this acquisition (ShedLock's lockAtMostFor), so a node that
        // takes over a slot whose holder died or overran gets the whole allowance.
        at_most = options_.at_most_for ? started + *options_.at_most_for : r.slot.end;
        at_least = options_.at_least_for ? r.slot.start + *options_.at_least_for : r.slot.end;
        if (last && r.slot.index <= *last) {
            r.skip_reason = "this node already ran the slot";
        } else if (options_.run_record) {
            if (JobRunRecord::find(*options_.run_record, job_, r.slot.index)) r.skip_reason = "the slot has a run record";
        } else if (started >= at_least) {
            // Someone may have run the slot and released it at at_least_for (O4): too late to tell.
            r.skip_reason = "too late: past at_least_for into the slot";
        }
        if (r.skip_reason.empty()) r.token = held.fence_token();
    } catch (...) {
        h->end_with(std::move(held));
        throw;
    }
    if (!r.skip_reason.empty()) {
        h->end_with(std::move(held));
        return r;
    }
    const SystemTime anchor_server = started;
    const SteadyTime cap = steady_at(anchor, anchor_server, at_most);
    {
        MutexLock g(h->mu);
        h->hold_until = steady_at(anchor, anchor_server, std::min(at_least, at_most));
        h->cap = cap;
        if (!h->release_now) h->held = std::move(held);
    }
    if (held) h->end_with(std::move(held));  // release() came first: the job runs with its stop requested
    {
        MutexLock g(mu_);
        last_slot_ = r.slot.index;
        last_stamp_ = started;
        last_stamp_sent_ = stamp_sent;
    }
    coordination_detail::JobHoldKeeper::instance().watch(h, cap);
    if (h->lost->load()) coordination_detail::JobHoldKeeper::instance().poke();  // lost before it was watched
    JobContext ctx(job_, r.slot, r.token, options_.owner, started, h->stop.get_token(), h->lost);
    try {
        job(ctx);
    } catch (...) {
        r.error = std::current_exception();
    }
    bool overran = false;
    Hold done;
    SteadyTime keep_until = SteadyTime::max();
    {
        MutexLock g(h->mu);
        h->job_done = true;
        overran = h->overran;
        if (h->held) {
            if (std::chrono::steady_clock::now() >= h->hold_until) {
                done = std::move(h->held);  // nothing left to keep it for: release it here
            } else {
                keep_until = h->hold_until;
            }
        }
    }
    if (done) {
        h->end_with(std::move(done));
    } else if (keep_until != SteadyTime::max()) {
        coordination_detail::JobHoldKeeper::instance().due_at(keep_until);
    }
    r.outcome = overran           ? JobOutcome::Overran
                : h->lost->load() ? JobOutcome::Lost
                : r.error         ? JobOutcome::Failed
                                  : JobOutcome::Ran;
    return r;
}

}  // namespace lockstep
