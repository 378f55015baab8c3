// O4's other cases (race_o4_cases.cpp) run a node of the job in a process of its own, so that it
// can be SIGKILLed or SIGSTOPped: the demo binary re-executed with the hidden sub-command
// `__o4-holder` (race_o4_holder.cpp). The child runs one slot of a JobLock with a run record and
// talks over its stdin/stdout, one line at a time:
//   RECORD=first: the job records its run (and its effect) in an open transaction, says "RUNNING <slot> <token>",
//                 then waits for stdin to close (it is killed while it waits);
//   RECORD=last:  says "RUNNING <slot> <token>", waits for "COMMIT", then records and commits:
//                 answers "COMMITTED" or "REFUSED" (the run record's fence check).
// It says "SKIPPED <reason>" when it did not get the slot.
//
// The trials that signal the holder live with it (race_o4_holder.cpp).
//
// Thread safety: the functions may run on any threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "forced.h"
#include "lockstep/coordination/job_schedule.h"
#include "lockstep/locks/lock_service.h"

namespace lockstep {
class JobContext;
class MysqlPool;
class Transaction;
}  // namespace lockstep

namespace lockstep::demo {

// The job's effect, in its transaction after record_run: one row of demo_o4_effects
// (job, slot, token). A run whose record is refused rolls it back.
void record_effect(Transaction& tx, const JobContext& run);

class DemoContext;

// A ZooKeeper hold's lease in O4's cases: the session timeout.
inline constexpr int kO4ZooKeeperSessionMs = 1500;

// What one trial of O4's cases works with: its lock URL and key prefix, its job's name, the
// database (run records and demo_o4_effects).
struct O4Trial {
    O4Trial(DemoContext& ctx, const std::string& backend);
    // A new lock service of this trial (its own connections: one node).
    std::unique_ptr<LockService> open() const;
    // How many runs of the job committed their effect.
    std::int64_t effects() const;
    std::string backend, url, prefix, job, mysql_url;
    MysqlPool& db;
};

// A schedule whose current slot (server time) started 10 ms ago, and its offset, so a trial
// needs not wait for a slot's start.
std::pair<JobSchedule, std::int64_t> starting_now(LockService& s, std::chrono::milliseconds period);
// The job of a node in this process: records the run and its effect, commits.
void commit_run(MysqlPool& db, JobContext& run);
// The SIGKILL (kill) or SIGSTOP trial: a holder process runs the slot and is signalled mid-job;
// a node of this process takes the slot over; a stopped holder is resumed and commits late.
Trial holder_process_trial(const O4Trial& trial, bool kill);

// The `__o4-holder` sub-command; its settings come from the environment (LSO4_*).
int o4_holder_main();

}  // namespace lockstep::demo
