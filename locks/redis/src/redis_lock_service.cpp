// RedisLockService: the `redis` backend's LockService. Its locks are RedisMutex and
// RedisReadWriteLock themselves (each a DistributedMutex / DistributedReadWriteLock), so the
// behaviour documented in redis_mutex.h / redis_read_write_lock.h is exactly what a user of the
// neutral interface gets.
#include "lockstep/locks/redis_lock_service.h"

#include "lockstep/cache/redis_client.h"
#include "lockstep/locks/lock_client.h"
#include "lockstep/locks/redis_mutex.h"
#include "lockstep/locks/redis_read_write_lock.h"
#include "lockstep/cache/redis_time.h"

namespace lockstep {

RedisLockService::RedisLockService(RedisLockClient& client) : client_(&client) {}

RedisLockService::RedisLockService(RedisOptions redis, LockServiceOptions options, ReplicationWait replication_wait) {
    // The watchdog and every waiter share the pool: keep room for both.
    if (redis.pool_size < 16) redis.pool_size = 16;
    owned_redis_ = std::make_unique<RedisClient>(std::move(redis));
    LockClientOptions lo;
    lo.prefix = std::move(options.prefix);
    lo.on_lost = std::move(options.on_lost);
    lo.replication_wait = replication_wait;
    owned_client_ = std::make_unique<RedisLockClient>(*owned_redis_, std::move(lo));
    client_ = owned_client_.get();
}

RedisLockService::~RedisLockService() {
    owned_client_.reset();  // stops the watchdog before its RedisClient goes
    owned_redis_.reset();
}

std::unique_ptr<DistributedMutex> RedisLockService::make_mutex(std::string name, LockOptions options) {
    return std::make_unique<RedisMutex>(*client_, std::move(name), std::move(options));
}

std::unique_ptr<DistributedReadWriteLock> RedisLockService::make_read_write_lock(std::string name, LockOptions options) {
    return std::make_unique<RedisReadWriteLock>(*client_, std::move(name), std::move(options));
}

std::chrono::system_clock::time_point RedisLockService::server_time() {
    return redis_server_time(client_->redis());
}

}  // namespace lockstep
