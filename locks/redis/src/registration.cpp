// The Redis backend's schemes for open_lock_service: the barging mutex (redis://) and the fair
// mutex (redis-fair://), each on a single node, a Cluster or behind Sentinel.
#include "lockstep/core/uri.h"
#include "lockstep/locks/lock_service.h"
#include "lockstep/locks/redis_fair_lock_service.h"
#include "lockstep/locks/redis_lock_service.h"

namespace lockstep::locks_detail {

void register_redis_lock_backend() {
    // redis:// and the topology schemes of cache/ (redis+cluster://, redis+sentinel://): one
    // RedisClient routes every lock key to its slot's master or to the sentinels' master.
    // rediss://, rediss+cluster://, rediss+sentinel://: the same over TLS (docs/tls.md).
    for (const char* scheme :
         {"redis", "rediss", "redis+cluster", "redis+sentinel", "rediss+cluster", "rediss+sentinel"}) {
        register_lock_backend(scheme, [](std::string_view url, LockServiceOptions o) -> std::unique_ptr<LockService> {
            ReplicationWait wait;  // ?wait_replicas=N&wait_timeout=D (RACES L8)
            return std::make_unique<RedisLockService>(parse_redis_url(take_replication_wait(url, wait)), std::move(o),
                                                      wait);
        });
    }
    // The same URLs as above with "redis-fair" in place of "redis": only the scheme chooses the
    // fair mutex ("redis-fair+cluster://a:1,b:2" opens "redis+cluster://a:1,b:2").
    for (const char* scheme : {"redis-fair", "redis-fair+cluster", "redis-fair+sentinel"}) {
        register_lock_backend(scheme, [](std::string_view url, LockServiceOptions o) -> std::unique_ptr<LockService> {
            const std::string redis_url = "redis" + std::string(url.substr(std::string_view("redis-fair").size()));
            return std::make_unique<RedisFairLockService>(parse_redis_url(redis_url), std::move(o));
        });
    }
    // rediss-fair://, rediss-fair+cluster://, rediss-fair+sentinel://: the fair mutex over TLS
    // ("rediss-fair://h:p?tls_ca=..." opens "rediss://...").
    for (const char* scheme : {"rediss-fair", "rediss-fair+cluster", "rediss-fair+sentinel"}) {
        register_lock_backend(scheme, [](std::string_view url, LockServiceOptions o) -> std::unique_ptr<LockService> {
            const std::string redis_url = "rediss" + std::string(url.substr(std::string_view("rediss-fair").size()));
            return std::make_unique<RedisFairLockService>(parse_redis_url(redis_url), std::move(o));
        });
    }
}

}  // namespace lockstep::locks_detail
