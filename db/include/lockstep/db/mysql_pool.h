// MysqlPool: a bounded, thread-safe pool of MysqlConnections to one server and database, and the
// usual entry point of the db layer. Share one per process per database.
//
//   lockstep::MysqlPool pool(lockstep::parse_mysql_url("mysql://root@127.0.0.1:3306/shop"));
//   pool.execute("UPDATE products SET stock = stock - 1 WHERE id = ? AND stock > 0", {42});
//   { lockstep::Transaction tx(pool); ...; tx.commit(); }           // transaction.h
//   { auto conn = pool.acquire(); conn->query(...); conn->query(...); }  // several on one session
//
// Connections are opened lazily, up to `pool_size`. A caller beyond that waits up to
// `pool_wait_timeout` for one to come back, then gets a TimeoutError (RetryCall). Opening a new
// connection that fails throws its DbError at once (a refused port fails in milliseconds, an
// unreachable host within `connect_timeout`); the pool never hides it behind a wait.
//
// Validation, and what it costs: a ping is a full round trip, so pinging on every lend would
// double the cost of a one-statement call. Instead the pool pings only a connection that has
// sat idle for at least `validation_interval` (default 500 ms, HikariCP's choice): a busy pool
// pings almost never, an idle one pays a round trip that is small next to its idle time. A
// connection that failed with a connection-breaking error is not validated but closed when it
// comes back, so errors never leave a dead connection in the pool. What remains: a connection
// used less than `validation_interval` ago whose server died since fails its next statement
// with a DbError (2006/2013, RetryCall) and is then replaced; set validation_interval to 0 to
// ping on every lend instead.
//
// Thread safety: every member may be called from any thread. The guards it returns belong to
// one thread each; they may outlive the pool (their connections are then closed on return).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "lockstep/core/mysql_options.h"
#include "lockstep/db/mysql_connection.h"
#include "lockstep/db/pooled_mysql_connection.h"
#include "lockstep/db/row.h"
#include "lockstep/db/sql_value.h"

namespace lockstep {

struct MysqlPoolStats {
    std::size_t open = 0;                   // connections existing now (idle + lent)
    std::size_t idle = 0;                   // of those, waiting in the pool
    std::uint64_t created = 0;              // connections ever opened
    std::uint64_t discarded = 0;            // broken, discarded or failed-validation connections closed
    std::uint64_t validations = 0;          // pings sent before lending an idle connection
    std::uint64_t validation_failures = 0;  // of those, how many found the connection dead
    std::uint64_t wait_timeouts = 0;        // acquire() calls that gave up with TimeoutError
};

class MysqlPool {
public:
    // Opens no connection yet. Throws ConfigError if pool_size is 0.
    explicit MysqlPool(MysqlOptions options);
    // Closes the idle connections; lent ones are closed when their guards return them.
    ~MysqlPool();
    MysqlPool(const MysqlPool&) = delete;
    MysqlPool& operator=(const MysqlPool&) = delete;

    // Lends a connection: an idle one (pinged first if idle for validation_interval or longer;
    // replaced if the ping fails) or a new one while fewer than pool_size exist. Waits up to
    // pool_wait_timeout otherwise. Throws TimeoutError when the wait runs out, and the DbError of
    // the failure when a new connection cannot be opened.
    PooledMysqlConnection acquire();

    // One statement on a pooled connection, in autocommit mode (see MysqlConnection).
    std::uint64_t execute(std::string_view sql, const SqlParams& params = {});
    std::vector<Row> query(std::string_view sql, const SqlParams& params = {});
    std::optional<Row> query_one(std::string_view sql, const SqlParams& params = {});

    MysqlPoolStats stats() const;
    const MysqlOptions& options() const noexcept;

private:
    std::unique_ptr<MysqlConnection> open_new();  // REQUIRES: a slot was reserved (open counted)

    std::shared_ptr<db_detail::PoolCore> core_;
};

}  // namespace lockstep
