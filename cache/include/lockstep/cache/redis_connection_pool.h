// A bounded, thread-safe pool of RedisConnections. Connections are created lazily up to
// `pool_size`; a caller beyond that waits up to `pool_wait_timeout`, then gets a TimeoutError.
// Lending validates a connection idle at least `pool_check_idle_after` (looks_alive: one
// non-blocking recv) and replaces a dead one, so after a redis-server restart the next call works
// without any command being repeated. A connection returned more recently is lent after the
// checks that need no system call (in_step); if the server closed it within that window, the
// command fails with a ConnectionError and RedisClient::get, a read, runs once more on a
// connection checked now. The trade-off is in docs/cache.md ("Lending a pooled connection").
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>

#include "lockstep/cache/redis_connection.h"
#include "lockstep/core/mutex.h"
#include "lockstep/core/redis_options.h"

namespace lockstep {

class RedisConnectionPool;

// RAII guard: returns the connection to the pool when destroyed (or discards it if broken).
class PooledRedisConnection {
public:
    PooledRedisConnection(PooledRedisConnection&& other) noexcept;
    PooledRedisConnection& operator=(PooledRedisConnection&&) = delete;
    PooledRedisConnection(const PooledRedisConnection&) = delete;
    ~PooledRedisConnection();

    RedisConnection& operator*() const noexcept { return *conn_; }
    RedisConnection* operator->() const noexcept { return conn_.get(); }
    // True if the pool lent this idle connection without looks_alive() (returned less than
    // pool_check_idle_after ago): a ConnectionError on it may only mean the server closed it
    // meanwhile, and a read may be run once more on RedisConnectionPool::acquire(Lend::Checked).
    bool lent_unchecked() const noexcept { return unchecked_; }

private:
    friend class RedisConnectionPool;
    PooledRedisConnection(RedisConnectionPool* pool, std::unique_ptr<RedisConnection> conn, bool unchecked = false)
        : pool_(pool), conn_(std::move(conn)), unchecked_(unchecked) {}
    RedisConnectionPool* pool_;
    std::unique_ptr<RedisConnection> conn_;
    bool unchecked_ = false;
};

struct RedisPoolStats {
    std::size_t open = 0;         // connections existing now (idle + lent)
    std::size_t idle = 0;
    std::uint64_t created = 0;    // connections ever opened
    std::uint64_t discarded = 0;  // broken or dead connections thrown away
    std::uint64_t wait_timeouts = 0;
    std::uint64_t lent_unchecked = 0;  // lends that skipped looks_alive() (returned recently)
    std::size_t waiting = 0;      // callers blocked in acquire() now, waiting for a free slot
};

class RedisConnectionPool {
public:
    explicit RedisConnectionPool(RedisOptions options);
    // REQUIRES: every PooledRedisConnection from this pool has been destroyed.
    ~RedisConnectionPool();

    // Default: check only connections idle at least pool_check_idle_after; Checked: every
    // idle connection lent is checked (the retry of a read that failed on an unchecked one).
    enum class Lend { Default, Checked };
    // Throws TimeoutError after pool_wait_timeout, ConnectionError if a new connection fails.
    PooledRedisConnection acquire(Lend lend = Lend::Default) EXCLUDES(mutex_);
    RedisPoolStats stats() const EXCLUDES(mutex_);
    const RedisOptions& options() const noexcept { return options_; }

private:
    friend class PooledRedisConnection;
    void release(std::unique_ptr<RedisConnection> conn) EXCLUDES(mutex_);

    RedisOptions options_;
    mutable Mutex mutex_;
    CondVar available_;
    std::deque<std::unique_ptr<RedisConnection>> idle_ GUARDED_BY(mutex_);
    std::size_t open_ GUARDED_BY(mutex_) = 0;  // idle + lent + being created
    RedisPoolStats counters_ GUARDED_BY(mutex_);
};

}  // namespace lockstep
