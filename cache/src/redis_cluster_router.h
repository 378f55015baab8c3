// Internal: how RedisClient reaches a Redis Cluster. It keeps the slot map (asked with CLUSTER
// SLOTS from any node it knows), one connection pool per master, and follows the cluster's
// redirections:
//
//   MOVED slot addr   the command did not run; the map is out of date: refresh it, retry there.
//   ASK slot addr     the slot is migrating and this key is already on addr: send ASKING and the
//                     command there, once, without changing the map.
//   TRYAGAIN, CLUSTERDOWN, a refused connection to a slot's master
//                     the command did not run; a failover or a migration is under way: refresh
//                     and retry with backoff until failover_wait, then ClusterUnavailableError.
//
// A connection that breaks after a command was written is never retried (the command may have
// run); the map is marked stale so the next call refreshes it first.
//
// Master changes (RACES L8): each new map is compared with the last owner of every slot. A slot
// whose owner is now another node while its old owner serves no slot any more had its master
// replaced (a failover, automatic or CLUSTER FAILOVER: the old master's slots all go to its
// promoted replica at once); listeners are told those slots. A slot moved while its old owner
// still serves others is a migration (MIGRATE moved its keys, TTL included) and is not reported.
// A node whose last slot was migrated away looks like a replaced master and is reported: a
// false alarm on the safe side. While a listener is registered a watch thread asks for the map
// every second, so a failover is noticed even when no command reaches the failed shard.
//
// Thread safety: all members may be called from any thread.
#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/cache/redis_cluster_slot.h"
#include "lockstep/cache/redis_connection_pool.h"
#include "lockstep/cache/redis_master_change.h"
#include "lockstep/cache/redis_reply.h"
#include "lockstep/core/mutex.h"
#include "lockstep/core/redis_options.h"

namespace lockstep::detail {

class RedisClusterRouter {
public:
    explicit RedisClusterRouter(RedisOptions options);
    ~RedisClusterRouter();  // stops the watch thread

    // What a routed call may be, for how its connection is lent (docs/cache.md, "Lending a pooled
    // connection" and "Redis Cluster"):
    //   Write  every lend is checked (looks_alive) first: a connection a failover closed is never
    //          written to, so the command is re-routed instead of failing "may have been applied".
    //   Read   a call that changes nothing (GET): lent like the standalone pool lends (unchecked
    //          when returned within pool_check_idle_after); a ConnectionError on such a lend
    //          marks the map stale and runs the call once more through the routing, on a
    //          checked lend. A TimeoutError is not retried (a node that does not answer).
    enum class Call { Write, Read };

    // Runs `call` on a connection to the master of `slot` (any master for nullopt), following
    // redirections. Error replies other than redirections are returned, not thrown.
    RedisReply run(std::optional<int> slot, const std::function<RedisReply(RedisConnection&)>& call,
                   Call kind = Call::Write);
    // Commands grouped per master, one round trip per master; replies in the callers' order.
    // Commands answered with a redirection are retried one by one, in order.
    std::vector<RedisReply> pipeline(const std::vector<std::vector<std::string>>& commands);

    // One command on every master of the current map (SCRIPT LOAD / SCRIPT FLUSH: scripts are
    // per node). Replies in the map's master order; a master that cannot be reached throws.
    std::vector<RedisReply> on_every_master(const std::vector<std::string>& args);
    // A connection to the master of `slot` (any master for nullopt), for callers that need one
    // connection for several commands (their keys must share the slot).
    PooledRedisConnection connection(std::optional<int> slot);
    RedisPoolStats stats() const;
    // Asks the cluster for the slot map now. Throws ConnectionError if no known node answers.
    void refresh() EXCLUDES(refresh_mutex_, mutex_);
    // "host:port" of the master serving `slot` in the current map ("" if unknown).
    std::string master_of(int slot);
    // Connection options for the master serving `slot` (the map is asked again when the slot has
    // no master in it). ConnectionError when still none serves it.
    RedisOptions master_options(int slot);

    // Called with the slots whose master was replaced (see above), on the thread that refreshed
    // the map (the watch thread, or a caller's), outside every lock of the router, never for the
    // first map. The first listener starts the watch thread. Returns an id for removal.
    using MasterChangeListener = std::function<void(const RedisMasterChange&)>;
    std::uint64_t add_master_change_listener(MasterChangeListener listener) EXCLUDES(listeners_mutex_);
    void remove_master_change_listener(std::uint64_t id) EXCLUDES(listeners_mutex_);
    // Called with the masters ("host:port") of every new map that differs from the last one in
    // any slot's owner (a migration, a failover, a node added or removed), on the thread that
    // refreshed it, outside every lock of the router. Starts the watch thread too; removed with
    // remove_master_change_listener.
    using MapChangeListener = std::function<void(const std::vector<std::string>& masters)>;
    std::uint64_t add_map_change_listener(MapChangeListener listener) EXCLUDES(listeners_mutex_);

private:
    RedisConnectionPool& pool_for(const std::string& address) EXCLUDES(mutex_);
    RedisConnectionPool* owner(std::optional<int> slot) EXCLUDES(mutex_, refresh_error_mutex_);
    void refresh_quietly() noexcept;
    // The body of refresh(): swaps the map in, returns the slots whose master was replaced.
    std::vector<int> load_map() REQUIRES(refresh_mutex_) EXCLUDES(mutex_);
    // Its stages: CLUSTER SLOTS from one node (nullopt and `error` set when it fails or answers
    // wrongly), then the answer swapped in as the map.
    std::optional<RedisReply> ask_for_slots(const std::string& address, std::string& error) REQUIRES(refresh_mutex_);
    std::vector<int> install_map(const RedisReply& slots, const std::string& address) REQUIRES(refresh_mutex_)
        EXCLUDES(mutex_);
    void tell_listeners(std::vector<int> replaced) EXCLUDES(listeners_mutex_);
    void watch_loop() EXCLUDES(listeners_mutex_);
    [[noreturn]] void unavailable(const std::string& why) const;

    const RedisOptions options_;
    mutable SharedMutex mutex_;
    std::array<RedisConnectionPool*, kRedisClusterSlots> slots_ GUARDED_BY(mutex_){};
    std::map<std::string, std::unique_ptr<RedisConnectionPool>> pools_ GUARDED_BY(mutex_);  // never erased: stable pointers
    std::map<RedisConnectionPool*, std::string> addresses_ GUARDED_BY(mutex_);
    std::vector<RedisConnectionPool*> masters_ GUARDED_BY(mutex_);  // serving at least one slot
    Mutex refresh_mutex_;                                           // one refresh at a time
    // The last master seen for each slot (kept when a map leaves the slot out), to tell a
    // replaced master from a first map or an uncovered slot.
    std::array<RedisConnectionPool*, kRedisClusterSlots> last_owner_ GUARDED_BY(refresh_mutex_){};
    // The connection the last map came from, kept for the next CLUSTER SLOTS (the watch thread
    // asks every second while listeners exist: one connection, not one per refresh). Dropped
    // when it fails; the next refresh connects to the first candidate that answers.
    std::unique_ptr<RedisConnection> map_connection_ GUARDED_BY(refresh_mutex_);
    std::string map_connection_address_ GUARDED_BY(refresh_mutex_);
    // Why the last map refresh of a call failed, for the error of a call that found no master.
    Mutex refresh_error_mutex_;
    std::string refresh_error_ GUARDED_BY(refresh_error_mutex_);
    std::atomic<bool> stale_{true};
    std::atomic<unsigned> next_any_{0};
    Mutex listeners_mutex_;
    std::map<std::uint64_t, MasterChangeListener> listeners_ GUARDED_BY(listeners_mutex_);
    std::map<std::uint64_t, MapChangeListener> map_listeners_ GUARDED_BY(listeners_mutex_);
    std::uint64_t map_changes_ GUARDED_BY(refresh_mutex_) = 0;  // maps installed that differ from the last
    std::uint64_t next_listener_ GUARDED_BY(listeners_mutex_) = 1;
    bool stopping_ GUARDED_BY(listeners_mutex_) = false;
    CondVar watch_cv_;
    std::thread watch_ GUARDED_BY(listeners_mutex_);  // started by the first listener
};

}  // namespace lockstep::detail
