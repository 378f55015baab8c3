#include "lockstep/invalidation/position_store.h"

#include "lockstep/db/mysql_pool.h"
#include "lockstep/db/pooled_mysql_connection.h"
#include "lockstep/db/row.h"

namespace lockstep {

PositionStore::PositionStore(MysqlOptions mysql) : pool_(std::make_unique<MysqlPool>(std::move(mysql))) {
    auto conn = pool_->acquire();
    conn->execute_unprepared("SET SESSION sql_log_bin = 0");
    conn->execute_unprepared(
        "CREATE TABLE IF NOT EXISTS lockstep_binlog_position ("
        " follower VARCHAR(64) NOT NULL PRIMARY KEY,"
        " gtid TEXT NOT NULL,"
        " updated_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3)"
        ") ENGINE=InnoDB");
}

PositionStore::~PositionStore() = default;

std::optional<std::string> PositionStore::load(const std::string& follower) {
    auto row = pool_->query_one("SELECT gtid FROM lockstep_binlog_position WHERE follower = ?", {follower});
    if (!row) return std::nullopt;
    return row->get<std::string>("gtid");
}

void PositionStore::save(const std::string& follower, const std::string& gtid) {
    auto conn = pool_->acquire();
    conn->execute_unprepared("SET SESSION sql_log_bin = 0");
    conn->execute("REPLACE INTO lockstep_binlog_position (follower, gtid) VALUES (?, ?)", {follower, gtid});
}

void PositionStore::erase(const std::string& follower) {
    auto conn = pool_->acquire();
    conn->execute_unprepared("SET SESSION sql_log_bin = 0");
    conn->execute("DELETE FROM lockstep_binlog_position WHERE follower = ?", {follower});
}

}  // namespace lockstep
