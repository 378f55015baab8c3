// Transaction: one MySQL transaction as a scope. It begins on construction, `commit()` makes it
// durable, and leaving the scope without commit — by return or by exception — rolls it back.
//
//   {
//       lockstep::Transaction tx(pool);  // lends a connection for its lifetime
//       auto row = tx.query_one("SELECT stock FROM products WHERE id = ? FOR UPDATE", {id});
//       if (row->get<int>("stock") < qty) return;                       // rolled back
//       tx.execute("UPDATE products SET stock = stock - ? WHERE id = ?", {qty, id});
//       tx.commit();
//   }
//
// Retrying: a DbError whose recovery() is RetryTransaction (deadlock 1213, lock-wait timeout
// 1205) means "run the whole unit of work again from its first read, in a new Transaction".
// After a deadlock the server has already rolled back; after a lock-wait timeout only the
// statement failed, and this object's destructor rolls back the rest.
//
// The destructor never throws: a failed ROLLBACK is logged (the server rolls back anyway when
// the session ends, and a connection that failed it is closed, not reused). A transaction on a
// broken connection is not rolled back explicitly for the same reason.
//
// Fault points: "db.before_commit" and "db.after_commit" fire around COMMIT (fault_point.h).
//
// Thread safety: none; one thread uses a Transaction and its connection.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "lockstep/db/mysql_connection.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/db/pooled_mysql_connection.h"
#include "lockstep/db/row.h"
#include "lockstep/db/sql_value.h"

namespace lockstep {

enum class IsolationLevel { ReadUncommitted, ReadCommitted, RepeatableRead, Serializable };

struct TransactionOptions {
    // Isolation for this transaction only (SET TRANSACTION ..., one more round trip). Empty keeps
    // the session's level: REPEATABLE READ on a default InnoDB server.
    std::optional<IsolationLevel> isolation;
    // START TRANSACTION READ ONLY: the server refuses writes and can skip some bookkeeping.
    bool read_only = false;
};

class Transaction {
public:
    // Lends a connection from `pool` for the transaction's lifetime, then begins. Throws what
    // acquire() throws (TimeoutError, DbError) or the DbError of START TRANSACTION.
    explicit Transaction(MysqlPool& pool, TransactionOptions options = {});
    // Begins on a connection the caller holds. REQUIRES: `connection` outlives this object.
    // Throws ConfigError if the connection already has an open Transaction: MySQL would silently
    // commit the first one when the second begins.
    explicit Transaction(MysqlConnection& connection, TransactionOptions options = {});
    // Rolls back unless committed; never throws.
    ~Transaction();
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;

    // Statements inside the transaction (see MysqlConnection). Throw ConfigError once the
    // transaction has ended.
    std::uint64_t execute(std::string_view sql, const SqlParams& params = {});
    std::vector<Row> query(std::string_view sql, const SqlParams& params = {});
    std::optional<Row> query_one(std::string_view sql, const SqlParams& params = {});

    // COMMIT. On success the transaction has ended. If it throws a DbError the transaction is
    // still open and will be rolled back by the destructor -- except when the connection broke
    // during COMMIT (recovery RetryCall): then whether it committed is unknown, and lockstep does
    // not guess; re-read to find out before repeating anything.
    void commit();
    // ROLLBACK now (instead of at scope exit). Throws DbError if it fails, ConnectionError if
    // the connection already broke (the server then rolls back when the session ends, unless a
    // COMMIT was in flight); the transaction has ended either way.
    void rollback();

    // True until commit() succeeds or rollback() runs.
    bool active() const noexcept { return active_; }
    MysqlConnection& connection() noexcept { return *conn_; }

private:
    void begin(const TransactionOptions& options);
    MysqlConnection& live(std::string_view what);

    std::optional<PooledMysqlConnection> owned_;  // set when lent from a pool
    MysqlConnection* conn_;
    bool active_ = false;
};

std::string_view to_string(IsolationLevel level) noexcept;

}  // namespace lockstep
