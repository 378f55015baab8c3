// The fenced (guarded) write: the database refuses a write from a lock holder whose fencing
// token is older than one that has already written the row (RACES L5, L8). A holder that was
// paused past its lease, or that kept a lock a failed-over Redis forgot, can still reach the
// database late; this is what stops its write.
//
//   lockstep::RedisMutex m(locks, "product:42");
//   std::scoped_lock hold(m);
//   lockstep::Transaction tx(pool);
//   lockstep::fenced_update(tx, 42, m.fence_token(),
//                           {.assignments = "stock = stock - ?", .params = {1}, .table = "products"});
//   tx.commit();
//
// runs  UPDATE products SET stock = stock - ?, fence = ? WHERE id = ? AND fence < ?
//
// and throws ConflictError (recovery RetryTransaction) when the row's fence is not older than the
// token. It writes only what `assignments` says: no version bump, no cache step. For a row a
// CachedRepository caches, use CachedRepository::update_fenced instead, which does both in the
// same transaction. The row's `fence` column must hold a BIGINT, 0 for a row never fenced (schema.h).
//
// FenceRule: the default, StrictlyNewer (`fence < token`), lets each token write a row once, so
// a write repeated by the same holder (a retry after a lost reply) is refused too and tells that
// the first one applied. NewerOrSame (`fence <= token`) lets the holder of the newest token write
// the row several times during one hold; it still refuses every older token.
//
// Table and column names are identifiers, checked (letters, digits, '_', '$') and quoted;
// `assignments` is SQL written by the programmer, never by a user: its values go in `params`.
//
// Thread safety: as the connection it runs on.
#pragma once

#include <cstdint>
#include <string>

#include "lockstep/db/mysql_connection.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/db/sql_value.h"
#include "lockstep/db/transaction.h"

namespace lockstep {

enum class FenceRule {
    StrictlyNewer,  // fence < token
    NewerOrSame,    // fence <= token
};

struct FencedUpdate {
    // The SET list without the fence, e.g. "stock = stock - ?, version = version + 1".
    std::string assignments;
    // Values for the '?' in `assignments`, in order.
    SqlParams params;
    // The table: required (no default; ConfigError when empty).
    std::string table;
    std::string key_column = "id";
    std::string fence_column = "fence";
    FenceRule rule = FenceRule::StrictlyNewer;
};

// Applies `update` to the row whose key is `key` if `token` passes the fence, and records `token`
// as the row's fence. Returns true when applied, false when no such row exists. Throws
// ConflictError naming both tokens when the fence refuses the write; DbError for server errors;
// ConfigError for a bad identifier or an empty `assignments`.
bool fenced_update(MysqlConnection& connection, const SqlValue& key, std::int64_t token,
                   const FencedUpdate& update);
bool fenced_update(Transaction& transaction, const SqlValue& key, std::int64_t token,
                   const FencedUpdate& update);
// On a pooled connection in autocommit mode.
bool fenced_update(MysqlPool& pool, const SqlValue& key, std::int64_t token, const FencedUpdate& update);

// The statement fenced_update runs (for logs and docs).
std::string fenced_update_sql(const FencedUpdate& update);

}  // namespace lockstep
