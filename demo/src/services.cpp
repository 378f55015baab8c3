#include "services.h"

#include <algorithm>

#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"
#include "lockstep/core/uri.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/locks/lock_client.h"
#include "lockstep/locks/redis_lock_service.h"

namespace lockstep::demo {

Services::Services(const Endpoints& endpoints, std::string prefix, int concurrency)
    : endpoints_(endpoints), prefix_(std::move(prefix)), concurrency_(std::max(concurrency, 1)) {
    redis_options_ = parse_redis_url(endpoints.redis_url);
    mysql_options_ = parse_mysql_url(endpoints.mysql_url);
    // Room for every worker thread plus the demo's own checks. A shared machine can be slow:
    // generous timeouts, so that a measured race is never a timeout in disguise.
    // Pools open connections lazily: generous bounds cost nothing until used.
    const auto pool = std::max<std::size_t>(static_cast<std::size_t>(concurrency_ + 4), 32);
    redis_options_.pool_size = std::max(redis_options_.pool_size, pool);
    redis_options_.socket_timeout = std::max(redis_options_.socket_timeout, std::chrono::milliseconds(5000));
    redis_options_.pool_wait_timeout = std::max(redis_options_.pool_wait_timeout, std::chrono::milliseconds(30000));
    mysql_options_.pool_size = std::max(mysql_options_.pool_size, pool);
    mysql_options_.pool_wait_timeout = std::max(mysql_options_.pool_wait_timeout, std::chrono::milliseconds(30000));
    redis_ = std::make_unique<RedisClient>(redis_options_);
    db_ = std::make_unique<MysqlPool>(mysql_options_);
    signals_ = std::make_unique<Signals>(redis_options_, prefix_, pool);
}

Services::~Services() {
    // The lock client stops its watchdog before the Redis client it uses goes away.
    lock_service_.reset();
    locks_.reset();
}

RedisLockClient& Services::locks() {
    std::lock_guard lock(locks_mutex_);
    if (!locks_) locks_ = new_lock_client();
    return *locks_;
}

RedisLockService& Services::lock_service() {
    RedisLockClient& client = locks();
    std::lock_guard lock(locks_mutex_);
    if (!lock_service_) lock_service_ = std::make_unique<RedisLockService>(client);
    return *lock_service_;
}

std::shared_ptr<RedisLockClient> Services::new_lock_client() {
    LockClientOptions options;
    options.prefix = prefix_;
    return std::make_shared<RedisLockClient>(*redis_, options);
}

}  // namespace lockstep::demo
