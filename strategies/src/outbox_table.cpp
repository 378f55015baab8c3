// The outbox table: its statement, and creating it with a check of the columns Outbox uses.
#include <string>

#include "lockstep/core/error.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/db/table_schema.h"
#include "lockstep/strategies/outbox.h"

namespace lockstep {

std::string_view outbox_table_statement() {
    return R"sql(CREATE TABLE IF NOT EXISTS outbox (
  id BIGINT NOT NULL AUTO_INCREMENT,
  cache_key VARBINARY(1024) NOT NULL,
  created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  KEY outbox_by_age (created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4)sql";
}

void create_outbox_table(MysqlPool& db) {
    db.acquire()->execute_unprepared(outbox_table_statement());
    // IF NOT EXISTS keeps a table of that name as it is: say which column Outbox would miss
    // instead of failing on the first write that records a row.
    const auto table = describe_table(db, "outbox");
    if (!table) throw ConfigError("outbox", "table 'outbox' is missing after CREATE TABLE");
    for (const char* column : {"id", "cache_key", "created_at"}) {
        if (!table->column(column)) {
            throw ConfigError("outbox", std::string("table 'outbox' exists without column '") + column +
                                            "'; migrate or drop it (create_outbox_table never alters a table)");
        }
    }
}

}  // namespace lockstep
