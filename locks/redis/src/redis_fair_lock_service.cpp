// RedisFairLockService: one RedisLockClient on its own RedisClient. Its mutex is a RedisMutex
// over the client's fair side (fair_mutex_side.cpp: the fair scripts and the grant wake rule as
// the side's hooks), so the fair mutex has the client's hold registry, watchdog, wait rooms,
// movable holds, counters, loss reporting and close(); its read-write locks are the client's
// RedisReadWriteLock (RedisLockService over the same client).
#include "lockstep/locks/redis_fair_lock_service.h"

#include "lockstep/cache/redis_client.h"
#include "lockstep/cache/redis_time.h"
#include "lockstep/core/error.h"
#include "lockstep/core/names.h"
#include "lockstep/locks/lock_client.h"
#include "lockstep/locks/lock_keys.h"
#include "lockstep/locks/redis_lock_service.h"
#include "lockstep/locks/redis_mutex.h"

namespace lockstep {

using namespace std::chrono_literals;

struct RedisFairLockService::State {
    State(RedisOptions redis_options, LockServiceOptions o, RedisFairLockOptions f) : prefix(o.prefix), fair(f) {
        // The watchdog and every waiter share the pool: keep room for both.
        if (redis_options.pool_size < 16) redis_options.pool_size = 16;
        redis = std::make_unique<RedisClient>(std::move(redis_options));
        LockClientOptions lo;
        lo.prefix = std::move(o.prefix);
        lo.on_lost = std::move(o.on_lost);
        client = std::make_unique<RedisLockClient>(*redis, std::move(lo));
        rw = std::make_unique<RedisLockService>(*client);
    }
    ~State() {
        rw.reset();
        client.reset();  // stops the watchdog, gives up the holds, before its RedisClient goes
        redis.reset();
    }

    std::string prefix;
    RedisFairLockOptions fair;
    std::unique_ptr<RedisClient> redis;
    std::unique_ptr<RedisLockClient> client;
    std::unique_ptr<RedisLockService> rw;
};

RedisFairLockService::RedisFairLockService(RedisOptions redis, LockServiceOptions options, RedisFairLockOptions fair) {
    if (fair.waiter_grace < 2ms) throw ConfigError("waiter_grace", "must be at least 2ms");
    state_ = std::make_shared<State>(std::move(redis), std::move(options), fair);
}

RedisFairLockService::~RedisFairLockService() = default;

std::unique_ptr<DistributedMutex> RedisFairLockService::make_mutex(std::string name, LockOptions options) {
    check_name("lock name", name);
    if (options.lease < 3ms) throw ConfigError("lease", "must be at least 3ms");
    return std::unique_ptr<DistributedMutex>(new RedisMutex(*state_->client, std::move(name), std::move(options), state_->fair));
}

std::unique_ptr<DistributedReadWriteLock> RedisFairLockService::make_read_write_lock(std::string name, LockOptions options) {
    return state_->rw->make_read_write_lock(std::move(name), std::move(options));
}

long long RedisFairLockService::queue_length(const std::string& name) const {
    const LockKeys keys(state_->prefix, name);
    return state_->redis->command({"LLEN", keys.stem() + ":fair:q"}).integer();
}

std::chrono::system_clock::time_point RedisFairLockService::server_time() {
    return redis_server_time(*state_->redis);
}

}  // namespace lockstep
