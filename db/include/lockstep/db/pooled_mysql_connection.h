// PooledMysqlConnection: the RAII guard through which MysqlPool lends a connection. While the
// guard lives, the connection is this holder's alone; when it is destroyed the connection goes
// back to the pool, or is closed if it broke (or was discard()ed) while lent.
//
//   {
//       lockstep::PooledMysqlConnection conn = pool.acquire();
//       conn->execute("DELETE FROM outbox WHERE id = ?", {id});
//   }  // returned here
//
// The guard keeps the pool's shared state alive, so a guard that outlives its MysqlPool is safe:
// its connection is then simply closed.
//
// Thread safety: one guard, one thread at a time (like the connection it holds). Guards of one
// pool may be destroyed concurrently from any threads.
#pragma once

#include <memory>

#include "lockstep/db/mysql_connection.h"

namespace lockstep {

namespace db_detail {
struct PoolCore;
}

class PooledMysqlConnection {
public:
    PooledMysqlConnection(PooledMysqlConnection&& other) noexcept = default;
    // Returns the connection held now, then takes over `other`'s.
    PooledMysqlConnection& operator=(PooledMysqlConnection&& other) noexcept;
    PooledMysqlConnection(const PooledMysqlConnection&) = delete;
    PooledMysqlConnection& operator=(const PooledMysqlConnection&) = delete;
    ~PooledMysqlConnection();

    // REQUIRES: the guard holds a connection (it was not moved from).
    MysqlConnection& operator*() const noexcept { return *conn_; }
    MysqlConnection* operator->() const noexcept { return conn_.get(); }
    MysqlConnection& get() const noexcept { return *conn_; }
    explicit operator bool() const noexcept { return conn_ != nullptr; }

private:
    friend class MysqlPool;
    PooledMysqlConnection(std::shared_ptr<db_detail::PoolCore> pool,
                          std::unique_ptr<MysqlConnection> conn) noexcept
        : pool_(std::move(pool)), conn_(std::move(conn)) {}
    void give_back() noexcept;

    std::shared_ptr<db_detail::PoolCore> pool_;
    std::unique_ptr<MysqlConnection> conn_;
};

}  // namespace lockstep
