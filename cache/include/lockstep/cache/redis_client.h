// RedisClient: the one entry point to Redis for the rest of lockstep. Thread-safe; share one
// per process per server. Commands go through a bounded connection pool; pub/sub goes through
// one dedicated subscriber connection created on first use.
//
//   lockstep::RedisClient redis(lockstep::parse_redis_url("redis://127.0.0.1:6379/0"));
//   redis.set("k", std::string("a\0b", 3), std::chrono::seconds(10));
//   std::optional<std::string> v = redis.get("k");
//
// Topologies (chosen by the URL, core/uri.h): redis:// is one server; redis+cluster:// routes
// every command to the master of its first key's hash slot (redis_cluster_slot.h), follows
// MOVED/ASK, waits out a failover up to failover_wait (then ClusterUnavailableError), splits
// pipelines per master and loads scripts per node; redis+sentinel:// asks the sentinels for the
// master, asks again on refused connections and READONLY, and follows +switch-master. See
// docs/cache.md.
//
// Errors: ConnectionError / TimeoutError when the server cannot be reached or a connection
// breaks (a command that may have been applied is never silently repeated); ProtocolError on
// an error reply. A missing key is std::nullopt, not an error.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/cache/cluster_unavailable_error.h"
#include "lockstep/cache/redis_cluster_slot.h"
#include "lockstep/cache/redis_connection_pool.h"
#include "lockstep/cache/redis_master_change.h"
#include "lockstep/cache/redis_reply.h"
#include "lockstep/cache/redis_script.h"
#include "lockstep/cache/redis_subscriber.h"
#include "lockstep/core/redis_options.h"

namespace lockstep {

class RedisClient {
public:
    explicit RedisClient(RedisOptions options = {});
    ~RedisClient();
    RedisClient(const RedisClient&) = delete;
    RedisClient& operator=(const RedisClient&) = delete;

    const RedisOptions& options() const noexcept;

    // One command. Throws ProtocolError on an error reply.
    RedisReply command(std::initializer_list<std::string_view> args);
    RedisReply command(const std::vector<std::string>& args);

    // N commands in one round trip on one connection; replies in order. Error replies are
    // returned in place (call throw_if_error on each), not thrown.
    std::vector<RedisReply> pipeline(const std::vector<std::vector<std::string>>& commands);

    // EVALSHA, with SCRIPT LOAD + one retry on NOSCRIPT. Throws ProtocolError on a script error.
    RedisReply eval(const RedisScript& script, const std::vector<std::string>& keys,
                    const std::vector<std::string>& args);
    // The same without copying keys and arguments (the locks' hot path: their keys are built
    // once per lock object). Spans of views, e.g. from a std::array<std::string_view, N>. Its
    // own name: an overload of eval would make eval(script, {}, {}) ambiguous.
    RedisReply eval_views(const RedisScript& script, std::span<const std::string_view> keys,
                          std::span<const std::string_view> args);

    std::optional<std::string> get(std::string_view key);
    // SET, with PX when ttl is given.
    void set(std::string_view key, std::string_view value,
             std::optional<std::chrono::milliseconds> ttl = std::nullopt);
    // DEL; returns how many keys existed.
    long long del(const std::vector<std::string>& keys);
    // SPUBLISH (sharded, like subscriber()); returns how many subscribers of this shard got it.
    long long publish(std::string_view channel, std::string_view message);

    // Borrow one connection for several commands that must share it. In a cluster: a connection
    // to some master (use connection_for_key when the commands touch keys).
    PooledRedisConnection connection();
    // A connection to the server holding `key` (its slot's master in a cluster).
    PooledRedisConnection connection_for_key(std::string_view key);
    RedisPoolStats pool_stats() const;  // summed over every node's pool in a cluster

    // Cluster only: "host:port" of the master of `key`'s slot in the current map ("" otherwise).
    std::string cluster_master_of(std::string_view key);
    // Cluster: ask the cluster for its slot map now (normally done on MOVED and failures).
    // Sentinel: ask the sentinels for the master now.
    void refresh_topology();
    // Sentinel only: "host:port" of the master in use ("" otherwise).
    std::string sentinel_master();
    // Sentinel and Cluster: `listener` is called (on the thread that noticed) each time a master
    // in use is replaced, with the keys that may have lost writes (RedisMasterChange). Sentinel:
    // every key, on +switch-master or a rediscovery after an error, never for the first master
    // found. Cluster: the slots whose master was replaced by another node (a failover; not a
    // slot migration), noticed by a map refresh: on an error, a MOVED, or the watch thread the
    // first listener starts (one CLUSTER SLOTS a second). Returns an id for
    // remove_master_change_listener; 0 (and never called) on a standalone server. REQUIRES: the
    // listener is quick and does not call back into this client's topology (refresh_topology,
    // sentinel_master).
    std::uint64_t add_master_change_listener(std::function<void(const RedisMasterChange&)> listener);
    void remove_master_change_listener(std::uint64_t id);

    // The shared subscriber connection (created on first use, lives as long as the client).
    RedisSubscriber& subscriber();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep
