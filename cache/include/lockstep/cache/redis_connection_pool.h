// A bounded, thread-safe pool of RedisConnections. Connections are created lazily up to
// `pool_size`; a caller beyond that waits up to `pool_wait_timeout`, then gets a TimeoutError.
// Lending validates an idle connection (looks_alive) and replaces a dead one, so after a
// redis-server restart the next call works without any command being repeated.
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

private:
    friend class RedisConnectionPool;
    PooledRedisConnection(RedisConnectionPool* pool, std::unique_ptr<RedisConnection> conn)
        : pool_(pool), conn_(std::move(conn)) {}
    RedisConnectionPool* pool_;
    std::unique_ptr<RedisConnection> conn_;
};

struct RedisPoolStats {
    std::size_t open = 0;         // connections existing now (idle + lent)
    std::size_t idle = 0;
    std::uint64_t created = 0;    // connections ever opened
    std::uint64_t discarded = 0;  // broken or dead connections thrown away
    std::uint64_t wait_timeouts = 0;
    std::size_t waiting = 0;      // callers blocked in acquire() now, waiting for a free slot
};

class RedisConnectionPool {
public:
    explicit RedisConnectionPool(RedisOptions options);
    // REQUIRES: every PooledRedisConnection from this pool has been destroyed.
    ~RedisConnectionPool();

    // Throws TimeoutError after pool_wait_timeout, ConnectionError if a new connection fails.
    PooledRedisConnection acquire() EXCLUDES(mutex_);
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
