// PositionStore: where a follower keeps its binlog position (a MariaDB GTID state), durably, in a
// table of its own in the watched server:
//
//   lockstep_binlog_position (follower VARCHAR(64) PRIMARY KEY, gtid TEXT, updated_at)
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
// Thread safety: safe from many threads (each call borrows its own pooled connection).
#pragma once

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
    void save(const std::string& follower, const std::string& gtid);
    void erase(const std::string& follower);

private:
    std::unique_ptr<MysqlPool> pool_;
};

}  // namespace lockstep
