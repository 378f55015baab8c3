// Internal to the db layer: the state MysqlPool shares with the guards it lends out. Shared
// ownership lets a guard return (or close) its connection even after the pool object is gone.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/core/mutex.h"
#include "lockstep/core/mysql_options.h"
#include "lockstep/db/mysql_connection.h"
#include "lockstep/db/mysql_pool.h"

namespace lockstep::db_detail {

struct PoolCore {
    explicit PoolCore(MysqlOptions o) : options(std::move(o)) {}

    const MysqlOptions options;
    std::string server;  // for messages

    Mutex mutex;
    CondVar available;  // an idle connection or a free slot appeared
    std::vector<std::unique_ptr<MysqlConnection>> idle GUARDED_BY(mutex);  // most recently returned last
    std::size_t open GUARDED_BY(mutex) = 0;  // idle + lent + being opened; never above options.pool_size
    bool closed GUARDED_BY(mutex) = false;   // the MysqlPool is gone: returned connections are closed
    MysqlPoolStats counters GUARDED_BY(mutex);

    // Takes a connection back from a guard. Keeps it for the next caller if it is healthy and
    // the pool still exists; closes it otherwise (outside the lock: closing talks to the server).
    void give_back(std::unique_ptr<MysqlConnection> conn) noexcept EXCLUDES(mutex);

    // Closes a connection that held a slot and frees the slot for a waiter.
    void drop(std::unique_ptr<MysqlConnection> conn) noexcept EXCLUDES(mutex);
};

}  // namespace lockstep::db_detail
