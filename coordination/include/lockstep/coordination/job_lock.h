// JobLock: runs a scheduled job at most once per slot across every node that shares a lock
// backend (RACES O2, O4). A plain mutex around the job (try_lock, run, unlock) only keeps runs
// from overlapping: a node whose timer fires 300 ms late finds the lock free and runs the same
// slot again (O4). JobLock ties the lock to the slot:
//
//   1. it takes the job's lock ("job:<name>"), waiting at most `boundary_wait` (a node arriving
//      at a slot boundary waits for the previous slot's holder to let go, instead of skipping);
//   2. the slot the lock server's clock is in at the grant is the one to run (never this node's
//      clock: job_schedule.h). The backend stamps the grant with its clock in the same atomic
//      step (Hold::server_time_at_grant; Redis: TIME inside the acquire script), so a node that
//      waited across a boundary runs the new slot, at no extra round trip; a backend that cannot
//      stamp it (MySQL, ZooKeeper, Redlock, fair Redis, memory) has its clock read right after
//      (LockService::server_time()). It skips the slot when this node already ran it, when the
//      grant came too late into the slot (at or after at_least_for from its start: some node
//      may have run and released it), or, with a run record, when the slot has a record. A node
//      that ran a slot skips it again before step 1, without asking the lock: the last grant's
//      stamp and this node's steady clock (rates agreeing to 1%, plus 1 ms) bound the server's
//      clock now, and while that bound is still in the slot no round trip is made; nearer the
//      boundary the server's clock is read;
//   3. it runs the job on the calling thread with a JobContext (slot, fencing token, a
//      std::stop_token, lost(), record_run(tx)), and keeps the hold at least until at_least_for
//      after the slot's start (default: the slot's end) even when the job is quick, so a late
//      node of the same slot finds it held (ShedLock's lockAtLeastFor);
//   4. the hold never outlasts at_most_for after its acquisition (ShedLock's lockAtMostFor):
//      then it is released, the job's stop_token is requested, and the run is reported Overran.
//
//   lockstep::JobLock lock(locks, "close-unpaid-orders", lockstep::JobSchedule::every(1min));
//   lockstep::JobRun r = lock.run_once([&](lockstep::JobContext& run) { ... });
//
// The hold is a movable Hold (locks/hold.h), renewed by the backend like any other. run_once
// returns when the job returns; a hold still due to be kept then (at_least_for not reached yet)
// is ended at its deadline by one thread the process shares among all JobLocks, or earlier by
// release() / the destructor. A job that is still running at at_most_for is stopped by that
// thread too. A run that returns past at_least_for releases the hold itself (one round trip).
//
// What it guarantees alone: one run per slot among nodes that fire within at_least_for of the
// slot's start, as long as no hold is lost (a lease that ran out under a paused or partitioned
// holder, a Redis failover: L5, L8). With a run record (job_run_record.h, `run_record` below and
// JobContext::record_run) exactly one run per slot commits its effects even then.
//
// Thread safety: run_once, release and request_stop may be called from any thread; runs of one
// JobLock are serialised (a second run_once waits for the first).
#pragma once

#include <chrono>
#include <cstdint>
#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

#include "lockstep/coordination/job_schedule.h"
#include "lockstep/core/mutex.h"
#include "lockstep/locks/lock_options.h"
#include "lockstep/locks/lock_service.h"

namespace lockstep {

class MysqlPool;
class Transaction;

struct JobLockOptions {
    // The lock's name on the backend; empty: "job:<job name>".
    std::string lock_name;
    // Lease and renewal of the hold (LockOptions::lease: how long a killed or paused holder keeps
    // the slot from everybody; keep it renewed). Its on_lost is called after JobLock's own.
    LockOptions lock;
    // The hold lasts at least this long after the slot's start, however quick the job. Unset:
    // the whole slot. Choose it longer than the latest any node's timer may fire into a slot
    // (GC pause, slow cron, clock step): without a run record, a node that gets the lock later
    // than this into the slot skips it.
    std::optional<std::chrono::milliseconds> at_least_for;
    // The hold never lasts longer than this after its acquisition: past it the hold is released,
    // the job's stop_token is requested and the run is reported Overran. Unset: until the slot's end.
    // Must be >= at_least_for (ConfigError).
    std::optional<std::chrono::milliseconds> at_most_for;
    // How long a node waits for the lock before it skips the slot: covers a node that fires at a
    // slot's start while the previous slot's holder is letting go.
    std::chrono::milliseconds boundary_wait{500};
    // Where the run records are (JobRunRecord::create_table first). Set: a node that gets the
    // lock runs the slot only if it has no record, at any time in the slot; the job calls
    // JobContext::record_run(tx). Unset: no record is looked at (record_run still works).
    MysqlPool* run_record = nullptr;
    // This node's name in records and logs; empty: a random one.
    std::string owner;
    // This node's own clock, read only to report how far it is from the server's
    // (JobRun::local_clock_offset). Unset: std::chrono::system_clock::now.
    std::function<std::chrono::system_clock::time_point()> local_clock;
};

enum class JobOutcome {
    Skipped,  // not run here: another node holds or ran the slot, or it came too late
    Ran,      // the job returned, with the hold kept throughout
    Failed,   // the job threw (JobRun::error)
    Overran,  // the job was still running at at_most_for: hold released, stop requested
    Lost,     // the hold was lost while the job ran (lease, failover): it may not have been alone
};

std::string_view to_string(JobOutcome o) noexcept;

struct JobRun {
    JobOutcome outcome = JobOutcome::Skipped;
    JobSlot slot;              // the slot run (or skipped)
    std::int64_t token = 0;    // the hold's fencing token; 0 when skipped
    std::string skip_reason;   // why it was skipped
    // This node's clock minus the server's, when the slot was computed.
    std::chrono::milliseconds local_clock_offset{0};
    std::exception_ptr error;  // Failed: what the job threw
};

// What a job is handed for one run. Valid for the duration of the job call only.
class JobContext {
public:
    const std::string& job() const noexcept { return job_; }
    const JobSlot& slot() const noexcept { return slot_; }
    // The hold's fencing token: pass it to fenced writes (db/fenced_write.h), or let
    // record_run use it.
    std::int64_t fence_token() const noexcept { return token_; }
    // Requested when the hold is lost or at_most_for is reached: stop, and do not commit.
    std::stop_token stop_token() const noexcept { return stop_; }
    bool stop_requested() const noexcept { return stop_.stop_requested(); }
    // The hold is known lost (no round trip).
    bool lost() const noexcept { return lost_->load(); }
    // The run record of this slot, inside the job's own transaction (JobRunRecord::record):
    // JobFenceError / JobSlotTakenError when another run of the slot (or a newer run of the job)
    // got there first; the transaction then rolls back with the job's effects. Call it first.
    void record_run(Transaction& tx) const;

private:
    friend class JobLock;
    JobContext(std::string job, JobSlot slot, std::int64_t token, std::string owner,
               std::chrono::system_clock::time_point started, std::stop_token stop,
               std::shared_ptr<const std::atomic<bool>> lost)
        : job_(std::move(job)), slot_(slot), token_(token), owner_(std::move(owner)), started_(started),
          stop_(std::move(stop)), lost_(std::move(lost)) {}
    std::string job_;
    JobSlot slot_;
    std::int64_t token_;
    std::string owner_;
    std::chrono::system_clock::time_point started_;
    std::stop_token stop_;
    std::shared_ptr<const std::atomic<bool>> lost_;
};

class JobLock {
public:
    // REQUIRES: `service` outlives this object. ConfigError for a bad job name (core/names.h),
    // or at_most_for < at_least_for.
    JobLock(LockService& service, std::string job, JobSchedule schedule, JobLockOptions options = {});
    // Ends a hold still kept, at once (see release()).
    ~JobLock();
    JobLock(const JobLock&) = delete;
    JobLock& operator=(const JobLock&) = delete;

    // Runs `job` for the current slot if this node gets it (see the steps above). The job's
    // exceptions are returned in JobRun::error (outcome Failed), never thrown. Throws the
    // backend's errors (ConnectionError, DbError, ...) when the server time, the lock or the run
    // record cannot be read; nothing ran then. A skip for a busy lock reads the server's clock
    // for JobRun::slot when the grant would have stamped it.
    JobRun run_once(const std::function<void(JobContext&)>& job);
    // Ends this node's hold now, if one is kept (a job still running is asked to stop). A late
    // node of the same slot may then run it again unless a run record says it ran.
    void release();
    // Requests the stop of a job running now (its stop_token), keeping the hold.
    void request_stop();

    const std::string& job() const noexcept { return job_; }
    const JobSchedule& schedule() const noexcept { return schedule_; }
    LockService& service() const noexcept { return service_; }
    const std::string& owner() const noexcept { return options_.owner; }

    struct SlotHold;
    struct LossTarget;

private:
    // Waits until the last run's hold has ended (at its own deadline, by this slot's start).
    void await_last_hold() EXCLUDES(mu_);

    // run_once's stages, in order (job_lock.cpp).
    using SystemTime = std::chrono::system_clock::time_point;
    using SteadyTime = std::chrono::steady_clock::time_point;
    struct LastRun;
    struct Grant;
    struct RunStart;
    std::chrono::milliseconds local_clock_offset(SystemTime server) const;
    LastRun last_run() EXCLUDES(mu_);
    bool skips_slot_already_run(const LastRun& last, JobRun& r, std::optional<SystemTime>& read_before)
        REQUIRES(run_mu_);
    std::shared_ptr<SlotHold> start_slot_hold() REQUIRES(run_mu_) EXCLUDES(mu_);
    Grant acquire_slot_lock(SlotHold& h) REQUIRES(run_mu_);
    void skip_refused_slot(SlotHold& h, const std::optional<SystemTime>& read_before, JobRun& r) REQUIRES(run_mu_);
    RunStart stamp_run_start(const Grant& grant) REQUIRES(run_mu_);
    void decide_slot(const Hold& held, RunStart& s, const LastRun& last, JobRun& r) REQUIRES(run_mu_);
    static SteadyTime start_cap(const RunStart& s);
    static void hand_hold_over(SlotHold& h, Hold held, const RunStart& s);
    void remember_run(std::int64_t slot, const RunStart& s) REQUIRES(run_mu_) EXCLUDES(mu_);
    void run_job(SlotHold& h, const std::function<void(JobContext&)>& job, SystemTime started, JobRun& r)
        REQUIRES(run_mu_);
    static JobOutcome end_run(SlotHold& h, const std::exception_ptr& error);

    LockService& service_;
    std::string job_;
    JobSchedule schedule_;
    JobLockOptions options_;
    std::shared_ptr<LossTarget> loss_target_;   // where the mutex's on_lost finds the current hold
    std::unique_ptr<DistributedMutex> mutex_;  // the job's lock; each run takes a movable Hold of it
    Mutex run_mu_;  // serialises run_once
    Mutex mu_;
    std::shared_ptr<SlotHold> hold_ GUARDED_BY(mu_);  // the last run's hold (it may still be kept)
    std::optional<std::int64_t> last_slot_ GUARDED_BY(mu_);  // the last slot this node ran
    // The server's clock at the last run's start, stamped after last_stamp_sent_ (this node's
    // steady clock): tells, without a round trip, that the last slot has not ended yet.
    std::chrono::system_clock::time_point last_stamp_ GUARDED_BY(mu_);
    std::chrono::steady_clock::time_point last_stamp_sent_ GUARDED_BY(mu_);
};

}  // namespace lockstep
