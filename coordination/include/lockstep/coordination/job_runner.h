// JobRunner: fires a job at every slot of its JobLock's schedule, on a thread of its own, and
// counts what each slot came to. The seeds' "close unpaid orders every minute" on N nodes:
//
//   lockstep::JobRunRecord::create_table(pool);
//   lockstep::JobLock lock(locks, "close-unpaid-orders", lockstep::JobSchedule::every(1min),
//                          {.run_record = &pool});
//   lockstep::JobRunner runner(lock, [&](lockstep::JobContext& run) {
//       lockstep::Transaction tx(pool);
//       run.record_run(tx);   // a second run of this slot fails here and rolls back
//       ... close the expired orders, restore their stock, on tx ...
//       tx.commit();
//   });
//
// Timing comes from the lock server's clock: after each slot the runner reads the server time
// and sleeps (steady clock) until the next slot's start, plus a random jitter in [0, jitter]
// when asked (spreads the nodes' first attempts). It fires the current slot at once when it
// starts. A slot whose run_once threw (server unreachable) counts as failed and the runner tries
// again after error_backoff. One info log line per slot.
//
// Thread safety: counts(), stop() from any thread. REQUIRES: the JobLock outlives the runner.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>

#include "lockstep/coordination/job_lock.h"
#include "lockstep/core/mutex.h"

namespace lockstep {

struct JobRunnerOptions {
    // A random delay in [0, jitter] after each slot's start before this node tries it.
    std::chrono::milliseconds jitter{0};
    // After a failed attempt (the server time or the lock could not be read), wait this long.
    std::chrono::milliseconds error_backoff{1000};
};

struct JobRunnerCounts {
    std::uint64_t slots = 0;    // attempts (one per slot reached)
    std::uint64_t skipped = 0;  // another node had it, or it came too late
    std::uint64_t ran = 0;
    std::uint64_t failed = 0;   // the job threw, or run_once could not reach the servers
    std::uint64_t overran = 0;  // still running at at_most_for
    std::uint64_t lost = 0;     // the hold was lost while the job ran
};

class JobRunner {
public:
    JobRunner(JobLock& lock, std::function<void(JobContext&)> job, JobRunnerOptions options = {});
    // stop().
    ~JobRunner();
    JobRunner(const JobRunner&) = delete;
    JobRunner& operator=(const JobRunner&) = delete;

    // No more slots; a job running now is asked to stop (its stop_token) and returns first.
    // The JobLock keeps its last hold until its deadline. Idempotent.
    void stop() EXCLUDES(mu_);
    JobRunnerCounts counts() const EXCLUDES(mu_);

private:
    void loop() EXCLUDES(mu_);
    void count(const JobRun& run) EXCLUDES(mu_);
    bool sleep_until(std::chrono::steady_clock::time_point t) EXCLUDES(mu_);

    JobLock& lock_;
    std::function<void(JobContext&)> job_;
    JobRunnerOptions options_;
    mutable Mutex mu_;
    CondVar changed_;
    bool stopping_ GUARDED_BY(mu_) = false;
    JobRunnerCounts counts_ GUARDED_BY(mu_);
    std::thread thread_;
};

}  // namespace lockstep
