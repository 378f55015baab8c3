#include "lockstep/db/transaction.h"

#include <exception>
#include <string>

#include "lockstep/core/error.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/core/logging.h"

namespace lockstep {

std::string_view to_string(IsolationLevel level) noexcept {
    switch (level) {
        case IsolationLevel::ReadUncommitted:
            return "READ UNCOMMITTED";
        case IsolationLevel::ReadCommitted:
            return "READ COMMITTED";
        case IsolationLevel::RepeatableRead:
            return "REPEATABLE READ";
        case IsolationLevel::Serializable:
            return "SERIALIZABLE";
    }
    return "REPEATABLE READ";
}

Transaction::Transaction(MysqlPool& pool, TransactionOptions options) : owned_(pool.acquire()) {
    conn_ = &owned_->get();
    begin(options);
}

Transaction::Transaction(MysqlConnection& connection, TransactionOptions options) : conn_(&connection) {
    begin(options);
}

void Transaction::begin(const TransactionOptions& options) {
    if (conn_->in_transaction()) {
        throw ConfigError("transaction",
                          "this connection already has an open Transaction; START TRANSACTION "
                          "would silently commit it");
    }
    if (options.isolation) {
        conn_->execute_unprepared("SET TRANSACTION ISOLATION LEVEL " +
                                  std::string(to_string(*options.isolation)));
    }
    try {
        conn_->execute_unprepared(options.read_only ? "START TRANSACTION READ ONLY" : "START TRANSACTION");
    } catch (...) {
        // SET TRANSACTION applies to the session's next transaction, which would then be some
        // later borrower's: do not lend this session again.
        if (options.isolation) conn_->discard();
        throw;
    }
    conn_->set_in_transaction(true);
    active_ = true;
}

Transaction::~Transaction() {
    if (!active_) return;
    active_ = false;
    conn_->set_in_transaction(false);
    if (conn_->broken()) {
        // The session is gone or in doubt; the server rolls back when it ends, and the pool
        // closes this connection rather than lending it again.
        logger()->debug("mysql: transaction abandoned on a broken connection (the server rolls it back)");
        return;
    }
    try {
        conn_->execute_unprepared("ROLLBACK");
    } catch (const std::exception& e) {
        logger()->warn("mysql: ROLLBACK failed (the connection will be closed, which rolls back): {}",
                       e.what());
        conn_->discard();
    } catch (...) {
        logger()->warn("mysql: ROLLBACK failed with an unknown exception (the connection will be closed)");
        conn_->discard();
    }
}

MysqlConnection& Transaction::live(std::string_view what) {
    if (!active_) {
        throw ConfigError("transaction",
                          std::string(what) + " after the transaction ended (committed or rolled back)");
    }
    return *conn_;
}

std::uint64_t Transaction::execute(std::string_view sql, const SqlParams& params) {
    return live("execute").execute(sql, params);
}

std::vector<Row> Transaction::query(std::string_view sql, const SqlParams& params) {
    return live("query").query(sql, params);
}

std::optional<Row> Transaction::query_one(std::string_view sql, const SqlParams& params) {
    return live("query_one").query_one(sql, params);
}

void Transaction::commit() {
    MysqlConnection& conn = live("commit");
    fault::point("db.before_commit");
    conn.execute_unprepared("COMMIT");
    active_ = false;
    conn.set_in_transaction(false);
    fault::point("db.after_commit");
}

void Transaction::rollback() {
    MysqlConnection& conn = live("rollback");
    active_ = false;
    conn.set_in_transaction(false);
    // On a broken connection this throws ConnectionError rather than pretend: the server rolls
    // back when the session ends, unless a COMMIT was already in flight.
    conn.execute_unprepared("ROLLBACK");
}

}  // namespace lockstep
