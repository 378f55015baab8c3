// RedisLockService and its two adapters: each forwards to the Redis lock it wraps, so the
// behaviour documented in redis_mutex.h / redis_read_write_lock.h is exactly what a user of the
// neutral interface gets.
#include "lockstep/locks/redis_lock_service.h"

#include "lockstep/cache/redis_client.h"
#include "lockstep/locks/lock_client.h"
#include "lockstep/locks/redis_mutex.h"
#include "lockstep/locks/redis_read_write_lock.h"
#include "lockstep/cache/redis_time.h"

namespace lockstep {

namespace {

using SteadyTime = std::chrono::steady_clock::time_point;

MutexOptions mutex_options(LockOptions o) {
    MutexOptions m;
    m.lease = o.lease;
    m.renew = o.renew;
    m.max_wait = o.max_wait;
    m.on_lost = std::move(o.on_lost);
    m.max_hold = o.max_hold;
    return m;
}

ReadWriteLockOptions rw_options(LockOptions o) {
    ReadWriteLockOptions r;
    r.lease = o.lease;
    r.renew = o.renew;
    r.max_wait = o.max_wait;
    r.on_lost = std::move(o.on_lost);
    r.max_hold = o.max_hold;
    return r;
}

class RedisMutexAdapter final : public DistributedMutex {
public:
    RedisMutexAdapter(RedisLockClient& c, std::string name, LockOptions o) : m_(c, std::move(name), mutex_options(std::move(o))) {}
    void lock() override { m_.lock(); }
    bool try_lock() override { return m_.try_lock(); }
    bool try_lock_until_steady(SteadyTime deadline) override { return m_.try_lock_until(deadline); }
    void unlock_as(UnlockMode mode) override { mode == UnlockMode::Throw ? m_.unlock_checked() : m_.unlock(); }
    Hold acquire() override { return m_.acquire(); }
    Hold try_acquire_until_steady(SteadyTime deadline) override { return m_.try_acquire_until_steady(deadline); }
    bool lost() const override { return m_.lost(); }
    int hold_count() const override { return m_.hold_count(); }
    FenceToken fence_token() const override { return m_.fence_token(); }
    const std::string& name() const noexcept override { return m_.name(); }

private:
    RedisMutex m_;
};

class RedisReadWriteLockAdapter final : public DistributedReadWriteLock {
public:
    RedisReadWriteLockAdapter(RedisLockClient& c, std::string name, LockOptions o)
        : rw_(c, std::move(name), rw_options(std::move(o))) {}
    void lock() override { rw_.lock(); }
    bool try_lock() override { return rw_.try_lock(); }
    bool try_lock_until_steady(SteadyTime deadline) override { return rw_.try_lock_until(deadline); }
    void unlock_as(UnlockMode mode) override { mode == UnlockMode::Throw ? rw_.unlock_checked() : rw_.unlock(); }
    void lock_shared() override { rw_.lock_shared(); }
    bool try_lock_shared() override { return rw_.try_lock_shared(); }
    bool try_lock_shared_until_steady(SteadyTime deadline) override { return rw_.try_lock_shared_until(deadline); }
    void unlock_shared_as(UnlockMode mode) override {
        mode == UnlockMode::Throw ? rw_.unlock_shared_checked() : rw_.unlock_shared();
    }
    Hold acquire() override { return rw_.acquire(); }
    Hold try_acquire_until_steady(SteadyTime deadline) override { return rw_.try_acquire_until_steady(deadline); }
    Hold acquire_shared() override { return rw_.acquire_shared(); }
    Hold try_acquire_shared_until_steady(SteadyTime deadline) override {
        return rw_.try_acquire_shared_until_steady(deadline);
    }
    bool lost() const override { return rw_.lost(); }
    int write_hold_count() const override { return rw_.write_hold_count(); }
    int read_hold_count() const override { return rw_.read_hold_count(); }
    FenceToken fence_token() const override { return rw_.fence_token(); }
    const std::string& name() const noexcept override { return rw_.name(); }

private:
    RedisReadWriteLock rw_;
};

}  // namespace

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
    return std::make_unique<RedisMutexAdapter>(*client_, std::move(name), std::move(options));
}

std::unique_ptr<DistributedReadWriteLock> RedisLockService::make_read_write_lock(std::string name, LockOptions options) {
    return std::make_unique<RedisReadWriteLockAdapter>(*client_, std::move(name), std::move(options));
}

std::chrono::system_clock::time_point RedisLockService::server_time() {
    return redis_server_time(client_->redis());
}

}  // namespace lockstep
