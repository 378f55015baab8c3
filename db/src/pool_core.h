// Internal to the db layer: the state MysqlPool shares with the guards it lends out. Shared
// ownership lets a guard return (or close) its connection even after the pool object is gone.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lockstep/core/mysql_options.h"
#include "lockstep/db/mysql_connection.h"
#include "lockstep/db/mysql_pool.h"

namespace lockstep::db_detail {

struct PoolCore {
    explicit PoolCore(MysqlOptions o) : options(std::move(o)) {}

    const MysqlOptions options;
    std::string server;  // for messages

    std::mutex mutex;
    std::condition_variable available;  // an idle connection or a free slot appeared
    // Guarded by `mutex`:
    std::vector<std::unique_ptr<MysqlConnection>> idle;  // most recently returned last
    std::size_t open = 0;  // idle + lent + being opened; never above options.pool_size
    bool closed = false;   // the MysqlPool is gone: returned connections are closed
    MysqlPoolStats counters;

    // Takes a connection back from a guard. Keeps it for the next caller if it is healthy and
    // the pool still exists; closes it otherwise (outside the lock: closing talks to the server).
    void give_back(std::unique_ptr<MysqlConnection> conn) noexcept;

    // Closes a connection that held a slot and frees the slot for a waiter.
    void drop(std::unique_ptr<MysqlConnection> conn) noexcept;
};

}  // namespace lockstep::db_detail
