// The demo's tables, created when missing, for the demo, the benchmarks and the tests:
//
//   products  id BIGINT PK, name, price (BIGINT cents), stock INT, version BIGINT, fence BIGINT
//             -- `version` is bumped by every repository write (versioned cache entries);
//             -- `fence` holds the highest fencing token that wrote the row (guarded writes).
//   orders    id AUTO_INCREMENT, product_id, quantity, status ('unpaid','paid','closed'),
//             created_at, updated_at -- indexed for "close unpaid orders older than N" (O2).
//   outbox    the library's own table (lockstep::create_outbox_table, strategies/outbox.h).
//
// A service has its own schema; lockstep needs none of these tables except `outbox`, and only
// when it uses an Outbox.
//
// All InnoDB, utf8mb4. Bootstrap is idempotent (CREATE TABLE IF NOT EXISTS), safe to run twice
// and from several processes at once. Because IF NOT EXISTS keeps an existing table as it is,
// bootstrap then checks that every table has the columns the demo uses, and throws ConfigError
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

namespace lockstep::testing {

// Creates missing tables in the current database, then verifies their columns.
// Throws DbError (e.g. 1046 when no database is selected) or ConfigError (a table lacks a column).
void bootstrap_demo_schema(MysqlConnection& connection);
void bootstrap_demo_schema(MysqlPool& pool);

// The CREATE TABLE statements bootstrap_demo_schema runs, in order.
const std::vector<std::string_view>& demo_schema_statements();

}  // namespace lockstep::testing
