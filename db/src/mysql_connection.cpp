#include "lockstep/db/mysql_connection.h"

#include <list>
#include <string>
#include <unordered_map>
#include <utility>

#include <cppconn/connection.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <cppconn/statement.h>

#include "connector.h"
#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"
#include "sql_error.h"
#include "statement_binding.h"

namespace lockstep {

using Clock = std::chrono::steady_clock;

struct MysqlConnection::Impl {
    std::string server;  // for messages
    std::size_t cache_capacity = 0;
    std::unique_ptr<sql::Connection> conn;
    // Prepared statements by SQL text, most recently used first. Declared after `conn` so they
    // are destroyed before it (a statement refers to its connection).
    using Entry = std::pair<std::string, std::unique_ptr<sql::PreparedStatement>>;
    std::list<Entry> lru;
    std::unordered_map<std::string_view, std::list<Entry>::iterator> index;  // keys point into lru
    bool broken = false;
    std::string broken_reason;
    bool discard_requested = false;
    bool in_transaction = false;
    Clock::time_point last_used = Clock::now();

    ~Impl() {
        index.clear();
        lru.clear();  // COM_STMT_CLOSE for each, while the connection still exists
        if (conn) {
            try {
                conn->close();
            } catch (const std::exception& e) {
                logger()->debug("mysql: closing the connection to {} failed: {}", server, e.what());
            }
        }
    }

    void mark_broken(std::string reason) noexcept {
        if (broken) return;
        broken = true;
        broken_reason = std::move(reason);
    }

    // The statement for `sql`: from the cache, or prepared now (one round trip). With the cache
    // off, the statement is parked in `uncached` and closed by the caller's scope.
    sql::PreparedStatement& prepared(std::string_view sql,
                                     std::unique_ptr<sql::PreparedStatement>& uncached) {
        const sql::SQLString text(sql.data(), sql.size());
        if (cache_capacity == 0) {
            uncached.reset(conn->prepareStatement(text));
            return *uncached;
        }
        if (auto it = index.find(sql); it != index.end()) {
            lru.splice(lru.begin(), lru, it->second);
            return *it->second->second;
        }
        std::unique_ptr<sql::PreparedStatement> statement(conn->prepareStatement(text));
        if (lru.size() >= cache_capacity) {
            index.erase(lru.back().first);
            lru.pop_back();
        }
        lru.emplace_front(std::string(sql), std::move(statement));
        index.emplace(lru.front().first, lru.begin());
        return *lru.front().second;
    }

    // Runs one call into Connector/C++ on behalf of `verb sql`: refuses a broken connection
    // without touching the network, turns sql::SQLException into DbError, and marks the
    // connection broken when the error (or an unknown failure) leaves the session in doubt.
    template <class F>
    decltype(auto) run(std::string_view verb, std::string_view sql, F&& f) {
        if (broken) {
            throw ConnectionError("mysql connection to " + server + " is unusable (" + broken_reason +
                                  "); not sent: " + db_detail::describe_statement(verb, sql));
        }
        struct Touch {
            Impl* impl;
            ~Touch() { impl->last_used = Clock::now(); }
        } touch{this};
        try {
            return std::forward<F>(f)();
        } catch (const sql::SQLException& e) {
            DbError error = db_detail::to_session_db_error(e, db_detail::describe_statement(verb, sql));
            if (db_detail::breaks_connection(error)) {
                logger()->info("mysql: connection to {} broken: {}", server, error.what());
                mark_broken("error " + std::to_string(error.code()));
            }
            throw error;
        } catch (const Error&) {
            throw;  // our own checks (parameter count, row shape): the session is fine
        } catch (...) {
            mark_broken("unexpected failure inside the driver");
            throw;
        }
    }
};

MysqlConnection::MysqlConnection(const MysqlOptions& options) : impl_(std::make_unique<Impl>()) {
    impl_->server = db_detail::describe_server(options);
    impl_->cache_capacity = options.statement_cache_size;
    impl_->conn = db_detail::open_connection(options);
}

MysqlConnection::~MysqlConnection() = default;

std::uint64_t MysqlConnection::execute(std::string_view sql, const SqlParams& params) {
    return impl_->run("execute", sql, [&]() -> std::uint64_t {
        std::unique_ptr<sql::PreparedStatement> uncached;
        sql::PreparedStatement& statement = impl_->prepared(sql, uncached);
        if (db_detail::result_column_count(statement) > 0) {
            // Running it would leave an unread result on the session ("commands out of sync").
            throw ConfigError("SQL statement",
                              "execute() was given a statement that returns rows; use query(): " +
                                  db_detail::describe_statement("", sql));
        }
        db_detail::bind_params(statement, params, sql);
        return static_cast<std::uint64_t>(statement.executeUpdate());
    });
}

std::vector<Row> MysqlConnection::query(std::string_view sql, const SqlParams& params) {
    return impl_->run("query", sql, [&] {
        std::unique_ptr<sql::PreparedStatement> uncached;
        sql::PreparedStatement& statement = impl_->prepared(sql, uncached);
        if (db_detail::result_column_count(statement) == 0) {
            throw ConfigError("SQL statement",
                              "query() was given a statement that returns no rows; use execute(): " +
                                  db_detail::describe_statement("", sql));
        }
        db_detail::bind_params(statement, params, sql);
        std::unique_ptr<sql::ResultSet> result(statement.executeQuery());
        return db_detail::read_rows(*result);
    });
}

std::optional<Row> MysqlConnection::query_one(std::string_view sql, const SqlParams& params) {
    std::vector<Row> rows = query(sql, params);
    if (rows.empty()) return std::nullopt;
    if (rows.size() > 1) {
        throw ProtocolError("query_one got " + std::to_string(rows.size()) +
                            " rows, expected at most one: " + db_detail::describe_statement("query", sql));
    }
    return std::move(rows.front());
}

void MysqlConnection::execute_unprepared(std::string_view sql) {
    impl_->run("execute", sql, [&] {
        std::unique_ptr<sql::Statement> statement(impl_->conn->createStatement());
        if (statement->execute(sql::SQLString(sql.data(), sql.size()))) {
            // Read and drop a result the caller did not ask for, so the session stays in sync.
            std::unique_ptr<sql::ResultSet> unread(statement->getResultSet());
        }
    });
}

std::int64_t MysqlConnection::last_insert_id() {
    return query_one("SELECT LAST_INSERT_ID() AS id")->get<std::int64_t>("id");
}

bool MysqlConnection::ping() noexcept {
    if (impl_->broken) return false;
    try {
        if (impl_->conn->isValid()) {
            impl_->last_used = Clock::now();
            return true;
        }
    } catch (const std::exception& e) {
        logger()->debug("mysql: ping of {} threw: {}", impl_->server, e.what());
    } catch (...) {
    }
    impl_->mark_broken("no answer to ping");
    return false;
}

bool MysqlConnection::broken() const noexcept {
    return impl_->broken;
}

void MysqlConnection::discard() noexcept {
    impl_->discard_requested = true;
}

bool MysqlConnection::reusable() const noexcept {
    return !impl_->broken && !impl_->discard_requested;
}

bool MysqlConnection::in_transaction() const noexcept {
    return impl_->in_transaction;
}

void MysqlConnection::set_in_transaction(bool value) noexcept {
    impl_->in_transaction = value;
}

std::chrono::steady_clock::time_point MysqlConnection::last_used() const noexcept {
    return impl_->last_used;
}

}  // namespace lockstep
