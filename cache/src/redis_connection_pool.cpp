#include "lockstep/cache/redis_connection_pool.h"

#include <chrono>
#include <string>
#include <utility>

#include "hiredis_io.h"
#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"
#include "redis_options_check.h"

namespace lockstep {

// unchecked_ travels with the connection: the cluster router keeps its lend in a std::optional,
// and a read's one retry depends on knowing the lend skipped looks_alive().
PooledRedisConnection::PooledRedisConnection(PooledRedisConnection&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)), conn_(std::move(other.conn_)), unchecked_(other.unchecked_) {}

PooledRedisConnection::~PooledRedisConnection() {
    if (pool_ != nullptr && conn_) pool_->release(std::move(conn_));
}

RedisConnectionPool::RedisConnectionPool(RedisOptions options) : options_(std::move(options)) {
    detail::check_redis_options(options_);
}

RedisConnectionPool::~RedisConnectionPool() = default;

PooledRedisConnection RedisConnectionPool::acquire(Lend lend) {
    const auto now = std::chrono::steady_clock::now();
    const auto deadline = now + options_.pool_wait_timeout;
    // A connection returned after this was in use a moment ago: the recv(MSG_PEEK) of
    // looks_alive() is skipped for it (it was the largest part of a cache hit's cost
    // over a raw GET). What it would catch in that window is a server that closed the socket
    // just now; the command then fails with a ConnectionError, never with a wrong reply, since
    // unsolicited bytes need a reply left unread, which broken() already refuses to lend.
    const auto recent = lend == Lend::Checked || options_.pool_check_idle_after.count() == 0
                            ? std::chrono::steady_clock::time_point::max()
                            : now - options_.pool_check_idle_after;
    MutexLock lock(mutex_);
    for (;;) {
        // Most recently returned first: it is the one most likely to still be alive.
        while (!idle_.empty()) {
            std::unique_ptr<RedisConnection> conn = std::move(idle_.back());
            idle_.pop_back();
            const bool skip_check = conn->idle_since() > recent;
            if (skip_check && conn->in_step()) {
                ++counters_.lent_unchecked;
                lock.unlock();
                return PooledRedisConnection(this, std::move(conn), true);
            }
            lock.unlock();
            if (!skip_check && conn->looks_alive()) return PooledRedisConnection(this, std::move(conn));
            // Dead while idle (typically: the server restarted). Its slot is reused for a fresh
            // connection right away, so the caller's command goes to the new server once.
            logger()->info("redis {}: discarding a pooled connection the server has closed",
                           detail::endpoint(options_.host, options_.port));
            conn.reset();
            lock.lock();
            ++counters_.discarded;
            --open_;
        }
        if (open_ < options_.pool_size) {
            ++open_;
            lock.unlock();
            try {
                auto conn = std::make_unique<RedisConnection>(options_);
                lock.lock();
                ++counters_.created;
                lock.unlock();
                return PooledRedisConnection(this, std::move(conn));
            } catch (...) {
                lock.lock();
                --open_;
                lock.unlock();
                available_.notify_one();
                throw;
            }
        }
        ++counters_.waiting;
        const auto status = available_.wait_until(mutex_, deadline);
        --counters_.waiting;
        if (status == std::cv_status::timeout && idle_.empty() && open_ >= options_.pool_size) {
            ++counters_.wait_timeouts;
            throw TimeoutError("redis " + detail::endpoint(options_.host, options_.port) +
                               ": no pooled connection became free within " +
                               std::to_string(options_.pool_wait_timeout.count()) + "ms (pool_size " +
                               std::to_string(options_.pool_size) + ", all lent)");
        }
    }
}

void RedisConnectionPool::release(std::unique_ptr<RedisConnection> conn) {
    const bool reusable = !conn->broken();
    if (!reusable) conn.reset();  // close outside the lock
    else conn->mark_idle(std::chrono::steady_clock::now());
    {
        MutexLock lock(mutex_);
        if (reusable) {
            idle_.push_back(std::move(conn));
        } else {
            ++counters_.discarded;
            --open_;
        }
    }
    available_.notify_one();
}

RedisPoolStats RedisConnectionPool::stats() const {
    MutexLock lock(mutex_);
    RedisPoolStats s = counters_;
    s.open = open_;
    s.idle = idle_.size();
    return s;
}

}  // namespace lockstep
