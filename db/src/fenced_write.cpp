#include "lockstep/db/fenced_write.h"

#include <cctype>

#include "lockstep/core/error.h"

namespace lockstep {

namespace {

std::string identifier(const std::string& name, const char* part) {
    bool ok = !name.empty() && name.size() <= 64 && !std::isdigit(static_cast<unsigned char>(name[0]));
    for (char c : name) {
        ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$');
    }
    if (!ok) throw ConfigError(part, "'" + name + "' is not a plain SQL identifier");
    return "`" + name + "`";
}

std::string select_fence_sql(const FencedUpdate& u) {
    // A locking read sees the latest committed row, as the UPDATE did (not a REPEATABLE READ
    // snapshot), so the diagnosis below matches what refused the write.
    return "SELECT " + identifier(u.fence_column, "fence column") + " AS fence FROM " +
           identifier(u.table, "table") + " WHERE " + identifier(u.key_column, "key column") +
           " = ? FOR UPDATE";
}

}  // namespace

std::string fenced_update_sql(const FencedUpdate& u) {
    if (u.assignments.empty()) throw ConfigError("assignments", "a fenced update must set something");
    if (u.table.empty()) throw ConfigError("table", "a fenced update must name its table");
    const std::string fence = identifier(u.fence_column, "fence column");
    return "UPDATE " + identifier(u.table, "table") + " SET " + u.assignments + ", " + fence + " = ? WHERE " +
           identifier(u.key_column, "key column") + " = ? AND " + fence +
           (u.rule == FenceRule::StrictlyNewer ? " < ?" : " <= ?");
}

bool fenced_update(MysqlConnection& connection, const SqlValue& key, std::int64_t token,
                   const FencedUpdate& u) {
    const std::string sql = fenced_update_sql(u);
    SqlParams params = u.params;
    params.emplace_back(token);
    params.push_back(key);
    params.emplace_back(token);
    // Rows matched, not rows changed (CLIENT_FOUND_ROWS): 1 means the fence let it through.
    if (connection.execute(sql, params) > 0) return true;

    std::optional<Row> row = connection.query_one(select_fence_sql(u), {key});
    if (!row) return false;
    const std::int64_t fence = row->get<std::int64_t>("fence");
    throw ConflictError("fenced write to " + u.table + " refused: fencing token " +
                        std::to_string(token) + " is stale, the row was written under token " +
                        std::to_string(fence) + " (a newer lock holder)");
}

bool fenced_update(Transaction& transaction, const SqlValue& key, std::int64_t token, const FencedUpdate& u) {
    if (!transaction.active())
        throw ConfigError("transaction", "fenced_update on a transaction that has ended");
    return fenced_update(transaction.connection(), key, token, u);
}

bool fenced_update(MysqlPool& pool, const SqlValue& key, std::int64_t token, const FencedUpdate& u) {
    PooledMysqlConnection conn = pool.acquire();
    return fenced_update(*conn, key, token, u);
}

}  // namespace lockstep
