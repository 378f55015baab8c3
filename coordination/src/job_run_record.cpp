#include "lockstep/coordination/job_run_record.h"

#include <cstdint>
#include <string>

namespace lockstep {

namespace {

constexpr int kDuplicateKey = 1062;
// An upsert's count for a row it updated (1: inserted, or matched and left as it was).
constexpr std::uint64_t kFenceRaised = 2;

}  // namespace

void JobRunRecord::create_table(MysqlPool& pool) {
    auto conn = pool.acquire();
    conn->execute_unprepared(
        "CREATE TABLE IF NOT EXISTS lockstep_job_runs ("
        " job VARCHAR(191) NOT NULL, slot BIGINT NOT NULL, token BIGINT NOT NULL, owner VARCHAR(64) NOT NULL,"
        " started DATETIME(6) NOT NULL, finished DATETIME(6) NULL, outcome VARCHAR(16) NOT NULL,"
        " PRIMARY KEY (job, slot)) ENGINE=InnoDB");
    conn->execute_unprepared(
        "CREATE TABLE IF NOT EXISTS lockstep_job_fences ("
        " job VARCHAR(191) NOT NULL PRIMARY KEY, fence BIGINT NOT NULL) ENGINE=InnoDB");
}

void JobRunRecord::record(Transaction& tx, const std::string& job, std::int64_t slot, std::int64_t token,
                          const std::string& owner, std::chrono::system_clock::time_point started) {
    // The fence row first: its row lock (taken by the upsert whether it inserts, raises or keeps
    // the fence) orders every record of this job, and a stale token is refused before the slot's
    // row is even looked at. One statement in the common case: it reports 2 (rows matched,
    // CLIENT_FOUND_ROWS) only when it raised the fence to this token, i.e. every earlier token was
    // smaller. 1 is a new row or a fence kept as it was (this token equal to it, or older): only
    // then is the fence read back, under the lock the upsert already holds.
    const std::uint64_t upserted = tx.execute(
        "INSERT INTO lockstep_job_fences (job, fence) VALUES (?, ?) "
        "ON DUPLICATE KEY UPDATE fence = IF(VALUES(fence) > fence, VALUES(fence), fence)",
        {job, token});
    if (upserted != kFenceRaised) {
        const auto fence = tx.query_one("SELECT fence FROM lockstep_job_fences WHERE job = ? FOR UPDATE", {job});
        const std::int64_t seen = fence ? fence->get<std::int64_t>("fence") : 0;
        if (token < seen) {
            throw JobFenceError("job '" + job + "' slot " + std::to_string(slot) + ": fencing token " +
                                std::to_string(token) + " is older than " + std::to_string(seen) +
                                ", which already recorded a run");
        }
    }
    const auto started_us =
        std::chrono::duration_cast<std::chrono::microseconds>(started.time_since_epoch()).count();
    try {
        // UTC, whatever the session's time zone: the epoch plus microseconds, no FROM_UNIXTIME.
        tx.execute(
            "INSERT INTO lockstep_job_runs (job, slot, token, owner, started, finished, outcome) VALUES "
            "(?, ?, ?, ?, TIMESTAMP '1970-01-01 00:00:00' + INTERVAL ? MICROSECOND, UTC_TIMESTAMP(6), 'ran')",
            {job, slot, token, owner, static_cast<std::int64_t>(started_us)});
    } catch (const DbError& e) {
        if (e.code() != kDuplicateKey) throw;
        throw JobSlotTakenError("job '" + job + "' slot " + std::to_string(slot) + " already has a run record");
    }
}

std::optional<JobRunRow> JobRunRecord::find(MysqlPool& pool, const std::string& job, std::int64_t slot) {
    const auto row = pool.query_one("SELECT job, slot, token, owner, outcome FROM lockstep_job_runs WHERE job = ? AND slot = ?",
                                    {job, slot});
    if (!row) return std::nullopt;
    return JobRunRow{row->get<std::string>("job"), row->get<std::int64_t>("slot"), row->get<std::int64_t>("token"),
                     row->get<std::string>("owner"), row->get<std::string>("outcome")};
}

std::int64_t JobRunRecord::count(MysqlPool& pool, const std::string& job) {
    const auto row = pool.query_one("SELECT COUNT(*) AS n FROM lockstep_job_runs WHERE job = ?", {job});
    return row ? row->get<std::int64_t>("n") : 0;
}

}  // namespace lockstep
