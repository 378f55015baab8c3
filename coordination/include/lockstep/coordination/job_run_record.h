// JobRunRecord: a durable "slot N of job J ran" row, written by the job inside its own
// transaction, so that the job's effects and the record commit together or not at all (RACES
// O4). A second run of the same slot -- a late node, a holder paused past its lease that wakes
// up, a job that overran at_most_for and commits late -- fails its record with a typed error
// and its transaction rolls back with all its effects: exactly one run of each slot commits.
//
//   lockstep::JobRunRecord::create_table(pool);       // once (CREATE TABLE IF NOT EXISTS)
//   ... in the job (JobContext::record_run calls record() with the run's values):
//   lockstep::Transaction tx(pool);
//   run.record_run(tx);                               // first: refuses a stale or repeated run
//   ... the job's own statements on tx ...
//   tx.commit();
//
// Two tables:
//   lockstep_job_runs    (job, slot) PRIMARY KEY, token, owner, started, finished, outcome: one
//                        row per slot that ran (a second insert of the slot: JobSlotTakenError);
//   lockstep_job_fences  (job) PRIMARY KEY, fence: the greatest fencing token that recorded a
//                        run of the job. A token below it is refused (JobFenceError): the lock
//                        moved on to a newer holder after this one's lease ended (L5). Its row
//                        lock also serialises the records of one job.
// What it does not do: it cannot undo effects a job made outside the transaction (a message
// sent, a file written), and it does not make a slot run when nobody runs it.
//
// Thread safety: stateless functions; the transaction passed in is used by one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "lockstep/core/error.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/db/transaction.h"

namespace lockstep {

// The slot already has a committed run record (or one being committed that then committed).
// Repeating cannot help: the slot ran.
class JobSlotTakenError : public ConflictError {
public:
    using ConflictError::ConflictError;
    Recovery recovery() const noexcept override { return Recovery::GiveUp; }
};

// This run's fencing token is older than one that already recorded a run of the job: its hold
// ended (lease, pause, overrun) and a newer holder ran after it. Repeating cannot help.
class JobFenceError : public ConflictError {
public:
    using ConflictError::ConflictError;
    Recovery recovery() const noexcept override { return Recovery::GiveUp; }
};

struct JobRunRow {
    std::string job;
    std::int64_t slot = 0;
    std::int64_t token = 0;
    std::string owner;
    std::string outcome;  // "ran"
};

class JobRunRecord {
public:
    static constexpr const char* kRunsTable = "lockstep_job_runs";
    static constexpr const char* kFencesTable = "lockstep_job_fences";

    // CREATE TABLE IF NOT EXISTS for both tables (InnoDB). DbError when the server refuses.
    static void create_table(MysqlPool& pool);
    // Inside `tx`: the fence check (JobFenceError), then the slot's row (JobSlotTakenError).
    // `started` is the run's start in server time. A concurrent record of the same job waits for
    // the other transaction (row locks) and then fails or succeeds by what that one did.
    static void record(Transaction& tx, const std::string& job, std::int64_t slot, std::int64_t token,
                       const std::string& owner, std::chrono::system_clock::time_point started);
    // The committed record of a slot, or nullopt.
    static std::optional<JobRunRow> find(MysqlPool& pool, const std::string& job, std::int64_t slot);
    // How many slots of `job` have a record (tests, the demo).
    static std::int64_t count(MysqlPool& pool, const std::string& job);
};

}  // namespace lockstep
