// Internal: how RedisClient reaches a Sentinel-guarded master. The master's address is asked
// from the sentinels (SENTINEL GET-MASTER-ADDR-BY-NAME, first one that answers, then confirmed
// with ROLE on the master itself), kept, and asked again when:
//   - a connection to the master cannot be made (the command was never sent): retried with
//     backoff until failover_wait, then ClusterUnavailableError;
//   - the master answers READONLY or MASTERDOWN (it was demoted; the command did not run);
//   - a sentinel publishes +switch-master for this name (a subscription on one sentinel):
//     the pools switch at once, without waiting for an error.
// A connection that breaks after a command was written throws at once (it may have run), and
// the next call asks the sentinels again.
//
// Thread safety: all members may be called from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "lockstep/cache/redis_connection_pool.h"
#include "lockstep/cache/redis_reply.h"
#include "lockstep/cache/redis_subscriber.h"
#include "lockstep/core/mutex.h"
#include "lockstep/core/redis_options.h"

namespace lockstep::detail {

class RedisSentinelRouter {
public:
    explicit RedisSentinelRouter(RedisOptions options);
    ~RedisSentinelRouter();

    RedisReply run(const std::function<RedisReply(RedisConnection&)>& call);
    std::vector<RedisReply> pipeline(const std::vector<std::vector<std::string>>& commands);
    PooledRedisConnection connection();
    RedisPoolStats stats() const;
    // "host:port" of the master in use.
    std::string master();
    // Options of the master in use (for the subscriber).
    RedisOptions master_options();
    // Options of the master in use as last found, without asking the sentinels (a switch
    // listener may call it); nullopt while none is known.
    std::optional<RedisOptions> known_master_options() const EXCLUDES(mutex_);
    // Asks the sentinels now. Throws ConnectionError when none names a master that says so.
    void rediscover() EXCLUDES(rediscover_mutex_, mutex_);
    // How many times the master in use changed (rediscovery or +switch-master).
    std::uint64_t switches() const noexcept { return switches_.load(); }
    // Called after the master in use changed (not for the first one found), outside every lock
    // of the router, on the thread that switched (the sentinel subscriber's, or a caller's that
    // rediscovered). Holds taken on the old master may be gone (RACES L8): the lock client listens.
    std::uint64_t add_switch_listener(std::function<void()> listener);
    void remove_switch_listener(std::uint64_t id);

private:
    RedisConnectionPool& current_pool() EXCLUDES(mutex_);
    void use(const std::string& address) EXCLUDES(mutex_);
    void watch_switches() noexcept;
    [[noreturn]] void unavailable(const std::string& why) const;

    const RedisOptions options_;
    mutable SharedMutex mutex_;
    std::map<std::string, std::unique_ptr<RedisConnectionPool>> pools_ GUARDED_BY(mutex_);  // never erased
    RedisConnectionPool* current_ GUARDED_BY(mutex_) = nullptr;
    std::string current_address_ GUARDED_BY(mutex_);
    Mutex rediscover_mutex_;  // one rediscovery at a time (guards no data)
    std::atomic<bool> stale_{true};
    std::atomic<std::uint64_t> switches_{0};
    Mutex listeners_mutex_;
    std::map<std::uint64_t, std::function<void()>> switch_listeners_ GUARDED_BY(listeners_mutex_);
    std::uint64_t next_listener_ GUARDED_BY(listeners_mutex_) = 1;
    std::unique_ptr<RedisSubscriber> sentinel_subscriber_;
    RedisSubscriber::Subscription switch_subscription_;
};

}  // namespace lockstep::detail
