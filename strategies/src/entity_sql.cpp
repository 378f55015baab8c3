#include "entity_sql.h"

#include <algorithm>

#include "lockstep/core/error.h"

namespace lockstep::detail {

namespace {

std::string quoted(const std::string& identifier, const char* part) {
    if (identifier.empty() || identifier.size() > 64) throw ConfigError(part, "must be 1 to 64 characters");
    for (char c : identifier) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$';
        if (!ok) throw ConfigError(part, "'" + identifier + "': only letters, digits, '_' and '$'");
    }
    return "`" + identifier + "`";
}

}  // namespace

EntitySql::EntitySql(const TableSpec& spec) {
    const std::string table = quoted(spec.table, "entity.table");
    const std::string key = quoted(spec.key_column, "entity.key_column");
    const std::string version = quoted(spec.version_column, "entity.version_column");
    if (spec.key_column == spec.version_column) throw ConfigError("entity.version_column", "same as the key column");
    std::string list = key + ", " + version;
    std::string sets;
    std::string insert_columns = key + ", " + version;
    std::string insert_values = "?, ?";
    std::string generated_columns = version;
    std::string generated_values = "?";
    for (const auto& c : spec.columns) {
        if (c == spec.key_column || c == spec.version_column) {
            throw ConfigError("entity.columns", "'" + c + "' is the key or version column; list data columns only");
        }
        const std::string q = quoted(c, "entity.columns");
        list += ", " + q;
        sets += q + " = ?, ";
        insert_columns += ", " + q;
        insert_values += ", ?";
        generated_columns += ", " + q;
        generated_values += ", ?";
    }
    for (const auto& c : spec.read_only_columns) {
        if (c == spec.key_column || c == spec.version_column) {
            throw ConfigError("entity.read_only_columns", "'" + c + "' is the key or version column");
        }
        list += ", " + quoted(c, "entity.read_only_columns");
    }
    std::string fence_select;
    if (!spec.fence_column.empty()) {
        const std::string fence = quoted(spec.fence_column, "entity.fence_column");
        fence_select = ", " + fence;
        update_fenced = "UPDATE " + table + " SET " + sets + version + " = ?, " + fence + " = ? WHERE " + key + " = ?";
    }
    select_prefix_ = "SELECT " + list + " FROM " + table + " WHERE " + key + " ";
    select_one = select_prefix_ + "= ?";
    lock_row = "SELECT " + list + fence_select + ", " + kClockSql + " AS " + kClockColumn + " FROM " + table + " WHERE " + key +
               " = ? FOR UPDATE";
    clock = std::string("SELECT ") + kClockSql + " AS " + kClockColumn;
    lock_version = "SELECT " + version + " FROM " + table + " WHERE " + key + " = ? FOR UPDATE";
    update = "UPDATE " + table + " SET " + sets + version + " = ? WHERE " + key + " = ?";
    insert = "INSERT INTO " + table + " (" + insert_columns + ") VALUES (" + insert_values + ")";
    insert_generated = "INSERT INTO " + table + " (" + generated_columns + ") VALUES (" + generated_values + ")";
    last_insert_id = "SELECT LAST_INSERT_ID() AS `id`";
    remove = "DELETE FROM " + table + " WHERE " + key + " = ?";
}

std::string EntitySql::select_in(std::size_t n) const {
    std::string sql = select_prefix_ + "IN (";
    for (std::size_t i = 0; i < n; ++i) sql += i == 0 ? "?" : ", ?";
    return sql + ")";
}

std::int64_t next_version(std::int64_t current, std::int64_t clock_us) {
    return std::max(current + 1, clock_us);
}

std::size_t in_batch_size(std::size_t n) {
    std::size_t size = 1;
    while (size < n && size < kMaxInBatch) size *= 2;
    return size;
}

}  // namespace lockstep::detail
