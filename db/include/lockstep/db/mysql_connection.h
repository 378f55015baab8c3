// MysqlConnection: one session with a MySQL/MariaDB server and the statement helpers that keep
// callers away from Connector/C++. Usually reached through MysqlPool (a PooledMysqlConnection
// guard) or a Transaction; the pool, the transaction and these helpers are all there is.
//
//   std::uint64_t n = conn.execute("UPDATE products SET stock = stock - ? WHERE id = ? AND stock >= ?",
//                                  {qty, id, qty});        // rows matched (see below)
//   std::vector<Row> rows = conn.query("SELECT id, name FROM products WHERE price < ?", {1000});
//   std::optional<Row> row = conn.query_one("SELECT stock FROM products WHERE id = ?", {id});
//
// Every statement is a server-side prepared statement, so parameters are never spliced into SQL
// text (no injection, binary-safe). Prepared statements are cached per connection by SQL text
// (MysqlOptions::statement_cache_size), so a repeated statement costs one round trip.
//
// `execute` returns rows MATCHED by an UPDATE, not rows changed (the CLIENT_FOUND_ROWS flag, as
// JDBC does): a conditional update that found its row reports 1 even when the values were
// already equal. INSERT ... ON DUPLICATE KEY UPDATE reports 1 per insert and 2 per update.
//
// Errors: every server or driver failure is a DbError with the server's code and SQLState
// (error.h). A failure that leaves the session unusable (connection lost, read timeout, server
// shutdown) also marks this connection broken(); any later call on it throws ConnectionError at
// once and the pool closes it instead of lending it again. A statement that may have reached
// the server before the connection broke is never repeated by lockstep.
//
// Sessions are not reset between lends: a `SET SESSION ...` stays on the connection. After
// changing session state, call discard() so the pool closes the connection instead of reusing it.
// Do not run START TRANSACTION / COMMIT by hand: use Transaction, which the pool can see.
//
// Thread safety: none; one thread at a time (the pool lends a connection to one holder).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "lockstep/core/error.h"  // the errors every call documents
#include "lockstep/core/mysql_options.h"
#include "lockstep/db/row.h"
#include "lockstep/db/sql_value.h"

namespace lockstep {

class MysqlConnection {
public:
    // Connects (autocommit on, utf8mb4, no auto-reconnect). Throws DbError: 1045 for bad
    // credentials, 1049 for an unknown database, 2002/2003 when nothing listens (RetryCall).
    explicit MysqlConnection(const MysqlOptions& options);
    ~MysqlConnection();
    MysqlConnection(const MysqlConnection&) = delete;
    MysqlConnection& operator=(const MysqlConnection&) = delete;

    // A statement that returns no rows (INSERT, UPDATE, DELETE, DDL). Returns rows affected
    // (for UPDATE: rows matched). Throws ConfigError if the statement returns rows: use query().
    std::uint64_t execute(std::string_view sql, const SqlParams& params = {});

    // A statement that returns rows; all of them are read before it returns.
    std::vector<Row> query(std::string_view sql, const SqlParams& params = {});

    // At most one row: std::nullopt when there is none; a ProtocolError when there are several
    // (silently taking the first would hide a missing WHERE or a broken unique key).
    std::optional<Row> query_one(std::string_view sql, const SqlParams& params = {});

    // One statement through the text protocol, not prepared, without parameters: for session
    // and transaction control (SET, START TRANSACTION) and DDL that runs once.
    void execute_unprepared(std::string_view sql);

    // LAST_INSERT_ID() of this session: the AUTO_INCREMENT id of its latest INSERT.
    std::int64_t last_insert_id();

    // One round trip (COM_PING). False when the server does not answer, which also marks the
    // connection broken. Never throws.
    bool ping() noexcept;

    // True after an error that broke the session; every later call throws ConnectionError.
    bool broken() const noexcept;
    // Asks the pool to close this connection when it comes back instead of lending it again
    // (e.g. after SET SESSION). The connection stays usable until then.
    void discard() noexcept;
    // False once broken or discarded: the pool then closes it on return.
    bool reusable() const noexcept;
    // True between a Transaction's START TRANSACTION and its COMMIT or ROLLBACK.
    bool in_transaction() const noexcept;
    // When the last statement or ping on this connection finished (steady clock).
    std::chrono::steady_clock::time_point last_used() const noexcept;

private:
    friend class Transaction;  // sets in_transaction
    void set_in_transaction(bool value) noexcept;

    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep
