// TableSchema: what the live database says about one table, read from information_schema, so
// that a layer above can check its assumptions (a repository's entity) once, at construction,
// instead of failing on the first statement that touches a misspelt column, or never failing
// at all because a warm cache hides it.
//
//   auto schema = lockstep::describe_table(pool, "accounts");   // nullopt: no such table
//   const lockstep::ColumnSchema* id = schema->column("id");    // nullptr: no such column
//
// Names compare case-insensitively, as MySQL compares column names.
//
// Thread safety: plain values; describe_table may be called from any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/db/mysql_pool.h"

namespace lockstep {

struct ColumnSchema {
    std::string name;
    std::string data_type;  // lower case, e.g. "bigint", "varchar", "datetime"
    bool nullable = false;
    bool auto_increment = false;
    // GENERATED ALWAYS AS (...), VIRTUAL or STORED: the database computes it, it cannot be written.
    bool generated = false;
    // DEFAULT ... ON UPDATE CURRENT_TIMESTAMP: the database sets it on every update.
    bool on_update = false;
};

struct TableSchema {
    std::string table;
    std::vector<ColumnSchema> columns;  // in table order

    const ColumnSchema* column(std::string_view name) const;
};

// The columns of `table` in the pool's current database; std::nullopt when there is no such
// table. Throws DbError / ConnectionError as any query.
std::optional<TableSchema> describe_table(MysqlPool& pool, std::string_view table);

}  // namespace lockstep
