#include "lockstep/coordination/job_lock.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <thread>

#include "lockstep/coordination/job_run_record.h"
#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"
#include "lockstep/core/names.h"

namespace lockstep {

namespace {

using SystemTime = std::chrono::system_clock::time_point;
using SteadyTime = std::chrono::steady_clock::time_point;

constexpr std::string_view kRefused = "another node holds the job's lock";

std::string random_owner() {
    std::random_device rd;
    char buf[17];
    std::snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
    return buf;
}

SteadyTime steady_at(SteadyTime anchor, SystemTime anchor_server, SystemTime server) {
    return anchor + std::chrono::duration_cast<std::chrono::steady_clock::duration>(server - anchor_server);
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

// One run's hold, kept by a thread of its own (a distributed lock belongs to the thread that took
// it) from the acquisition to its deadline; shared with the caller of run_once and the lock's
// loss callback.
struct JobLock::Hold {
    Mutex mu;
    CondVar changed;
    bool decided GUARDED_BY(mu) = false;  // acquired and checked, or refused, or failed
    bool run GUARDED_BY(mu) = false;      // the decision: this node runs the slot
    JobRun decision GUARDED_BY(mu);
    SystemTime started GUARDED_BY(mu);
    std::exception_ptr error GUARDED_BY(mu);
    bool job_done GUARDED_BY(mu) = false;
    bool release_now GUARDED_BY(mu) = false;
    bool overran GUARDED_BY(mu) = false;
    const std::shared_ptr<std::atomic<bool>> lost = std::make_shared<std::atomic<bool>>(false);
    std::stop_source stop;
    std::thread thread;  // started and joined under JobLock::run_mu_

    void decide(JobRun r, bool run_it) EXCLUDES(mu) {
        MutexLock g(mu);
        decision = std::move(r);
        run = run_it;
        decided = true;
        changed.notify_all();
    }
    void fail(std::exception_ptr e) EXCLUDES(mu) {
        MutexLock g(mu);
        error = std::move(e);
        decided = true;
        changed.notify_all();
    }
};

namespace {

struct KeepArgs {
    LockService* service;
    std::string lock_name;
    LockOptions lock;
    JobSchedule schedule;
    std::optional<std::chrono::milliseconds> at_least_for, at_most_for;
    std::chrono::milliseconds boundary_wait;
    MysqlPool* run_record;
    std::string job;
    std::function<SystemTime()> local_clock;
    std::optional<std::int64_t> last_slot;
};

// The hold's thread: acquire, decide, keep until the deadline, release.
void keep(const std::shared_ptr<JobLock::Hold>& h, KeepArgs a) {
    LockOptions lo = std::move(a.lock);
    lo.on_lost = [weak = std::weak_ptr<JobLock::Hold>(h), user = std::move(lo.on_lost)](const LockLoss& loss) {
        if (auto s = weak.lock()) {
            s->lost->store(true);
            s->stop.request_stop();
            MutexLock g(s->mu);
            s->changed.notify_all();
        }
        if (user) user(loss);
    };
    std::unique_ptr<DistributedMutex> m;
    try {
        m = a.service->make_mutex(a.lock_name, std::move(lo));
        if (!m->try_lock_for(a.boundary_wait)) {
            JobRun r;
            r.skip_reason = std::string(kRefused);
            h->decide(std::move(r), false);
            return;
        }
    } catch (...) {
        h->fail(std::current_exception());
        return;
    }
    JobRun r;
    SystemTime now, at_least, at_most;
    SteadyTime anchor;
    try {
        // The slot is the one the server's clock is in now that the lock is ours: a node that
        // waited across a boundary runs the new slot, never the old one.
        now = a.service->server_time();
        anchor = std::chrono::steady_clock::now();  // after the reply: deadlines err late, never early
        r.local_clock_offset = std::chrono::duration_cast<std::chrono::milliseconds>(
            (a.local_clock ? a.local_clock() : std::chrono::system_clock::now()) - now);
        r.slot = a.schedule.slot_at(now);
        at_least = a.at_least_for ? r.slot.start + *a.at_least_for : r.slot.end;
        // at_most_for counts from this acquisition (ShedLock's lockAtMostFor), so a node that
        // takes over a slot whose holder died or overran gets the whole allowance.
        at_most = a.at_most_for ? now + *a.at_most_for : r.slot.end;
        if (a.last_slot && r.slot.index <= *a.last_slot) {
            r.skip_reason = "this node already ran the slot";
        } else if (a.run_record) {
            if (JobRunRecord::find(*a.run_record, a.job, r.slot.index)) r.skip_reason = "the slot has a run record";
        } else if (now >= at_least) {
            // Someone may have run the slot and released it at at_least_for (O4): too late to tell.
            r.skip_reason = "too late: past at_least_for into the slot";
        }
        if (r.skip_reason.empty()) r.token = m->fence_token();
    } catch (...) {
        m->unlock();
        h->fail(std::current_exception());
        return;
    }
    if (!r.skip_reason.empty()) {
        m->unlock();
        h->decide(std::move(r), false);
        return;
    }
    const SteadyTime hold_until = steady_at(anchor, now, std::min(at_least, at_most));
    const SteadyTime cap = steady_at(anchor, now, at_most);
    {
        MutexLock g(h->mu);
        h->started = now;
    }
    h->decide(std::move(r), true);
    bool overran = false;
    {
        MutexLock g(h->mu);
        for (;;) {
            if (h->release_now || h->lost->load()) break;
            const auto t = std::chrono::steady_clock::now();
            if (t >= cap) {
                overran = h->overran = !h->job_done;
                break;
            }
            if (h->job_done && t >= hold_until) break;
            h->changed.wait_until(h->mu, h->job_done ? hold_until : cap);
        }
    }
    if (overran) h->stop.request_stop();
    m->unlock();  // reports (never throws) a hold that was lost meanwhile
}

}  // namespace

JobLock::JobLock(LockService& service, std::string job, JobSchedule schedule, JobLockOptions options)
    : service_(service), job_(std::move(job)), schedule_(std::move(schedule)), options_(std::move(options)) {
    check_name("job name", job_);
    if (options_.lock_name.empty()) options_.lock_name = "job:" + job_;
    if (options_.owner.empty()) options_.owner = random_owner();
    if (options_.at_least_for && options_.at_most_for && *options_.at_most_for < *options_.at_least_for) {
        throw ConfigError("at_most_for", "must not be shorter than at_least_for");
    }
    if (options_.boundary_wait.count() < 0) throw ConfigError("boundary_wait", "must not be negative");
}

JobLock::~JobLock() { release(); }

void JobLock::signal_release() {
    std::shared_ptr<Hold> h;
    {
        MutexLock g(mu_);
        h = hold_;
    }
    if (!h) return;
    h->stop.request_stop();
    MutexLock g(h->mu);
    h->release_now = true;
    h->changed.notify_all();
}

void JobLock::join_hold() {
    std::shared_ptr<Hold> h;
    {
        MutexLock g(mu_);
        h = hold_;
    }
    if (h && h->thread.joinable()) h->thread.join();
}

void JobLock::release() {
    signal_release();
    MutexLock r(run_mu_);  // a running job returns first (its stop was requested)
    join_hold();
}

void JobLock::request_stop() {
    MutexLock g(mu_);
    if (hold_) hold_->stop.request_stop();
}

JobRun JobLock::run_once(const std::function<void(JobContext&)>& job) {
    MutexLock serial(run_mu_);
    std::optional<std::int64_t> last;
    {
        MutexLock g(mu_);
        last = last_slot_;
    }
    const SystemTime server_now = service_.server_time();
    const auto offset = std::chrono::duration_cast<std::chrono::milliseconds>(
        (options_.local_clock ? options_.local_clock() : std::chrono::system_clock::now()) - server_now);
    const JobSlot expected = schedule_.slot_at(server_now);
    if (last && expected.index <= *last) {
        // This node ran the slot already: no need to ask the lock (the common case of a timer
        // that fires twice, or a loop that calls run_once more often than the slots change).
        JobRun r;
        r.slot = expected;
        r.local_clock_offset = offset;
        r.skip_reason = "this node already ran the slot";
        return r;
    }
    join_hold();  // the previous slot's hold ends at its own deadline, by this slot's start
    auto h = std::make_shared<Hold>();
    {
        MutexLock g(mu_);
        hold_ = h;
    }
    h->thread = std::thread(keep, h,
                            KeepArgs{&service_, options_.lock_name, options_.lock, schedule_, options_.at_least_for,
                                     options_.at_most_for, options_.boundary_wait, options_.run_record, job_,
                                     options_.local_clock, last});
    JobRun result;
    SystemTime started;
    {
        MutexLock g(h->mu);
        while (!h->decided) h->changed.wait(h->mu);
        if (h->error || !h->run) {
            auto error = h->error;
            result = h->decision;
            if (result.skip_reason == kRefused) {
                result.slot = expected;
                result.local_clock_offset = offset;
            }
            g.unlock();
            h->thread.join();
            if (error) std::rethrow_exception(error);
            return result;
        }
        result = h->decision;
        started = h->started;
    }
    {
        MutexLock g(mu_);
        last_slot_ = result.slot.index;
    }
    JobContext ctx(job_, result.slot, result.token, options_.owner, started, h->stop.get_token(), h->lost);
    try {
        job(ctx);
    } catch (...) {
        result.error = std::current_exception();
    }
    bool overran = false;
    {
        MutexLock g(h->mu);
        h->job_done = true;
        overran = h->overran;
        h->changed.notify_all();
    }
    result.outcome = overran           ? JobOutcome::Overran
                     : h->lost->load() ? JobOutcome::Lost
                     : result.error    ? JobOutcome::Failed
                                       : JobOutcome::Ran;
    return result;
}

}  // namespace lockstep
