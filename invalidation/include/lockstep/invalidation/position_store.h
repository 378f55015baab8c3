// PositionStore: where a follower keeps its binlog position (a MariaDB GTID state), durably, in a
// table of its own in the watched server:
//
//   lockstep_binlog_position (follower VARCHAR(64) PRIMARY KEY, gtid TEXT, updated_at)
//
// The follower saves a position only AFTER the deletes of every transaction up to it have landed
// in Redis, so a crash replays (at-least-once: a key may be deleted twice) and never skips
// (at-most-once would lose an invalidation, C5/C9).
//
// The writes are made with sql_log_bin = 0: a position write that went to the binlog would be an
// event the follower then reads, whose position it then saves, forever.
//
// REQUIRES: `pool` is the store's own (its connections are left with sql_log_bin = 0).
// Thread safety: safe from many threads (each call borrows its own pooled connection).
#pragma once

#include <optional>
#include <string>

namespace lockstep {

class MysqlPool;

class PositionStore {
public:
    // `pool` is borrowed and must outlive the store. Creates the table if missing.
    explicit PositionStore(MysqlPool& pool);

    std::optional<std::string> load(const std::string& follower);
    void save(const std::string& follower, const std::string& gtid);
    void erase(const std::string& follower);

private:
    MysqlPool& pool_;
};

}  // namespace lockstep
