// RedisLockService: the LockService of the Redis backend. Its mutexes are RedisMutex and its
// read-write locks RedisReadWriteLock (redis_mutex.h, redis_read_write_lock.h), behind the
// backend-neutral interfaces; a thin adapter each, nothing re-implemented.
//
//   lockstep::RedisLockService locks(lockstep::parse_redis_url(url));          // owns its clients
//   lockstep::RedisLockService locks(existing_lock_client);                    // borrows one
//
// Thread safety: every member may be called from any thread. REQUIRES: a borrowed
// RedisLockClient outlives the service; the service outlives every lock it made.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "lockstep/core/redis_options.h"
#include "lockstep/locks/lock_client.h"
#include "lockstep/locks/lock_service.h"

namespace lockstep {

class RedisClient;

class RedisLockService : public LockService {
public:
    // Borrows `client` (its prefix and on_lost stay as they are).
    explicit RedisLockService(RedisLockClient& client);
    // Owns a RedisClient to `redis` and a RedisLockClient with `options`' prefix and on_lost, and
    // `replication_wait` (RACES L8: WAIT after every new acquisition; off by default).
    explicit RedisLockService(RedisOptions redis, LockServiceOptions options = {},
                              ReplicationWait replication_wait = {});
    ~RedisLockService() override;

    std::unique_ptr<DistributedMutex> make_mutex(std::string name, LockOptions options = {}) override;
    std::unique_ptr<DistributedReadWriteLock> make_read_write_lock(std::string name, LockOptions options = {}) override;
    std::string_view backend() const noexcept override { return "redis"; }
    std::chrono::system_clock::time_point server_time() override;

    RedisLockClient& client() const noexcept { return *client_; }

private:
    std::unique_ptr<RedisClient> owned_redis_;
    std::unique_ptr<RedisLockClient> owned_client_;
    RedisLockClient* client_ = nullptr;
};

// The lock service URL's own parameters, `redis://host:port?wait_replicas=1&wait_timeout=100ms`
// (open_lock_service): read into `wait` and removed; returns the URL without them for
// parse_redis_url. ConfigError naming the parameter when one is malformed.
std::string take_replication_wait(std::string_view url, ReplicationWait& wait);

}  // namespace lockstep
