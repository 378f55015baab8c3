// The demo's tables, created when missing:
//
//   products  id BIGINT PK, name, price (BIGINT cents), stock INT, version BIGINT, fence BIGINT
//             -- `version` is bumped by every repository write (versioned cache entries);
//             -- `fence` holds the highest fencing token that wrote the row (guarded writes).
//   orders    id AUTO_INCREMENT, product_id, quantity, status ('unpaid','paid','closed'),
//             created_at, updated_at -- indexed for "close unpaid orders older than N" (O2).
//   outbox    id AUTO_INCREMENT, cache_key (bytes), created_at -- cache keys to invalidate,
//             written in the same transaction as the change and replayed after a crash (C5).
//
// All InnoDB, utf8mb4. Bootstrap is idempotent (CREATE TABLE IF NOT EXISTS), safe to run twice
// and from several processes at once. Because IF NOT EXISTS keeps an existing table as it is,
// bootstrap then checks that every table has the columns lockstep uses, and throws ConfigError
// naming the table and the missing column instead of letting a later statement fail obscurely.
//
// There is deliberately no foreign key from orders to products: InnoDB would take shared locks
// on the parent row for every order insert, adding lock waits and deadlocks of its own to the
// races the demo is meant to show.
//
// Thread safety: the functions may be called from any thread.
#pragma once

#include <string_view>
#include <vector>

#include "lockstep/db/mysql_connection.h"
#include "lockstep/db/mysql_pool.h"

namespace lockstep {

// Creates missing tables in the connection's current database, then verifies their columns.
// Throws DbError (e.g. 1046 when no database is selected) or ConfigError (a table lacks a column).
void bootstrap_schema(MysqlConnection& connection);
void bootstrap_schema(MysqlPool& pool);

// The CREATE TABLE statements bootstrap_schema runs, in order: for docs and for operators who
// create the schema by hand.
const std::vector<std::string_view>& schema_statements();

}  // namespace lockstep
