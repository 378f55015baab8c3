// PositionStore: where a follower keeps its binlog position (a MariaDB GTID state), durably, in a
// table of its own in the watched server:
//
//   lockstep_binlog_position (follower VARCHAR(64) PRIMARY KEY, gtid TEXT, epoch BIGINT, updated_at)
//
// The follower saves a position only AFTER the deletes of every transaction up to it have landed
// in Redis (first and second DEL), so a crash replays (at-least-once: a key may be deleted twice)
// and never skips (at-most-once would lose an invalidation, C5/C9).
//
// The writes are made with sql_log_bin = 0: a position write that went to the binlog would be an
// event the follower then reads, whose position it then saves, forever. That session setting
// stays on the connection, so the store OWNS its pool (built from the options it is given): no
// other code can borrow one of its connections and have its own writes silently left out of the
// binlog (and so out of every follower's and replica's view).
//
// Fenced writes (`--ha`: several instances of one follower, one active): the active instance
// passes its leader epoch (coordination/leader_latch.h) with every write. The store refuses a
// write whose epoch is older than the row's (ConflictError, the fence check of db/fenced_write.h
// with FenceRule::NewerOrSame: the same leader saves many times per term), so an instance that
// was paused past its lease and wakes believing it still leads cannot move the position of its
// successor back or forth. claim() records a new term's epoch before the position is read, so
// no write of an older term lands between that read and the new leader's first save.
// Epoch 0 means unfenced (one instance): it writes whatever the row's epoch.
//
// Thread safety: safe from many threads (each call borrows its own pooled connection).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "lockstep/core/mysql_options.h"

namespace lockstep {

class MysqlPool;

class PositionStore {
public:
    // Opens a pool of its own (at most `mysql.pool_size` connections; 2 is plenty) and creates
    // the table if missing.
    explicit PositionStore(MysqlOptions mysql);
    ~PositionStore();
    PositionStore(const PositionStore&) = delete;
    PositionStore& operator=(const PositionStore&) = delete;

    std::optional<std::string> load(const std::string& follower);
    // Saves `gtid`. With `epoch` > 0: only if no newer epoch wrote the row (ConflictError naming
    // both epochs otherwise); the row then carries `epoch`.
    void save(const std::string& follower, const std::string& gtid, std::int64_t epoch = 0);
    // Records `epoch` as the row's fence without moving the position (nothing when there is no
    // row yet). ConflictError when a newer epoch already wrote it.
    void claim(const std::string& follower, std::int64_t epoch);
    // The epoch of the last fenced write (0: none, or no row).
    std::int64_t epoch(const std::string& follower);
    void erase(const std::string& follower);

private:
    std::unique_ptr<MysqlPool> pool_;
};

}  // namespace lockstep
