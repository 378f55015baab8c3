#include "lockstep/invalidation/position_store.h"

#include "lockstep/db/fenced_write.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/db/pooled_mysql_connection.h"
#include "lockstep/db/row.h"

namespace lockstep {

namespace {

constexpr const char* kTable = "lockstep_binlog_position";

// The fenced statement (fenced_update): `assignments` plus epoch = token, where epoch <= token.
FencedUpdate fenced(std::string assignments, SqlParams params) {
    FencedUpdate u;
    u.assignments = std::move(assignments);
    u.params = std::move(params);
    u.table = kTable;
    u.key_column = "follower";
    u.fence_column = "epoch";
    u.rule = FenceRule::NewerOrSame;
    return u;
}

}  // namespace

PositionStore::PositionStore(MysqlOptions mysql) : pool_(std::make_unique<MysqlPool>(std::move(mysql))) {
    auto conn = pool_->acquire();
    conn->execute_unprepared("SET SESSION sql_log_bin = 0");
    conn->execute_unprepared(
        "CREATE TABLE IF NOT EXISTS lockstep_binlog_position ("
        " follower VARCHAR(64) NOT NULL PRIMARY KEY,"
        " gtid TEXT NOT NULL,"
        " epoch BIGINT NOT NULL DEFAULT 0,"
        " updated_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3)"
        ") ENGINE=InnoDB");
    // A table made before fenced writes existed.
    conn->execute_unprepared("ALTER TABLE lockstep_binlog_position ADD COLUMN IF NOT EXISTS epoch BIGINT NOT NULL DEFAULT 0");
}

PositionStore::~PositionStore() = default;

std::optional<std::string> PositionStore::load(const std::string& follower) {
    auto row = pool_->query_one("SELECT gtid FROM lockstep_binlog_position WHERE follower = ?", {follower});
    if (!row) return std::nullopt;
    return row->get<std::string>("gtid");
}

std::int64_t PositionStore::epoch(const std::string& follower) {
    auto row = pool_->query_one("SELECT epoch FROM lockstep_binlog_position WHERE follower = ?", {follower});
    return row ? row->get<std::int64_t>("epoch") : 0;
}

void PositionStore::save(const std::string& follower, const std::string& gtid, std::int64_t epoch) {
    auto conn = pool_->acquire();
    conn->execute_unprepared("SET SESSION sql_log_bin = 0");
    if (epoch <= 0) {
        conn->execute("INSERT INTO lockstep_binlog_position (follower, gtid) VALUES (?, ?) "
                      "ON DUPLICATE KEY UPDATE gtid = VALUES(gtid)",
                      {follower, gtid});
        return;
    }
    // Twice at most: a row inserted by another instance between the update and the insert is
    // then fenced like any other.
    for (int attempt = 0; attempt < 2; ++attempt) {
        if (fenced_update(*conn, follower, epoch, fenced("gtid = ?", {gtid}))) return;
        if (conn->execute("INSERT IGNORE INTO lockstep_binlog_position (follower, gtid, epoch) VALUES (?, ?, ?)",
                          {follower, gtid, epoch}) > 0) {
            return;
        }
    }
    fenced_update(*conn, follower, epoch, fenced("gtid = ?", {gtid}));
}

void PositionStore::claim(const std::string& follower, std::int64_t epoch) {
    auto conn = pool_->acquire();
    conn->execute_unprepared("SET SESSION sql_log_bin = 0");
    fenced_update(*conn, follower, epoch, fenced("gtid = gtid", {}));
}

void PositionStore::erase(const std::string& follower) {
    auto conn = pool_->acquire();
    conn->execute_unprepared("SET SESSION sql_log_bin = 0");
    conn->execute("DELETE FROM lockstep_binlog_position WHERE follower = ?", {follower});
}

}  // namespace lockstep
