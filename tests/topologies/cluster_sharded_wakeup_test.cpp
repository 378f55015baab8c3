// Pub/sub in a cluster (RACES L7 on a cluster): lock wake-ups are sharded
// (the scripts SPUBLISH on a channel carrying the lock's hash tag; RedisSubscriber SSUBSCRIBEs
// on the master owning that slot), so a release is one message on one shard, never a broadcast
// over the whole cluster bus. Measured with the nodes' own counters (CLUSTER INFO:
// cluster_stats_messages_publish_sent counts classic PUBLISH forwarded to other nodes,
// ..._publishshard_sent the sharded ones sent to the shard's replicas), exactly, with a classic
// PUBLISH run beside it so the measurement is seen to move. Then the owning master is SIGKILLed
// (its replica promoted): the waiter's subscriber relocates to the new master and a later
// release wakes it by message (its re-check is 60 s away, so a prompt acquisition is the message).
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "eventually.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/cache/redis_cluster_slot.h"
#include "lockstep/cache/redis_connection.h"
#include "lockstep/locks/lock_client.h"
#include "lockstep/locks/lock_keys.h"
#include "lockstep/locks/redis_mutex.h"
#include "lockstep/servers/local_redis_cluster.h"
#include "test_servers.h"
#include "topology_test_support.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;

using test::eventually;
using test::on_node;

// One cluster for this file (3 masters, one replica each); the failover test runs last and
// gives the killed node back.
LocalRedisCluster& cluster() {
    static LocalRedisCluster instance;
    return instance;
}

// `field` of CLUSTER INFO on one node (Redis leaves a counter out while it is 0).
long long cluster_info(int port, const std::string& field) {
    const std::string info = on_node(port, {"CLUSTER", "INFO"}).str();
    const auto at = info.find(field + ":");
    if (at == std::string::npos) return 0;
    return std::stoll(info.substr(at + field.size() + 1));
}

struct BusCounters {
    std::map<std::size_t, long long> publish, publishshard;  // per running node
};

BusCounters bus_counters() {
    BusCounters c;
    for (std::size_t n = 0; n < cluster().size(); ++n) {
        if (cluster().pid(n) == 0) continue;
        c.publish[n] = cluster_info(cluster().port(n), "cluster_stats_messages_publish_sent");
        c.publishshard[n] = cluster_info(cluster().port(n), "cluster_stats_messages_publishshard_sent");
    }
    return c;
}

long long shard_subscribers(int port, const std::string& channel) {
    return on_node(port, {"PUBSUB", "SHARDNUMSUB", channel}).elements().at(1).integer();
}

struct Side : test::LockClientOnTopology {
    // A woken waiter acquires at once; one that missed its message would wait claim_refresh.
    explicit Side(const std::string& prefix)
        : LockClientOnTopology(cluster().redis_options(), prefix, [](LockClientOptions& lo) { lo.claim_refresh = 60s; }) {}
};

// Holds `held` until `waiter` is queued on the lock's master, then releases it: the release
// wakes the waiter by message. Returns how long the waiter took from the release to the hold.
std::chrono::milliseconds hand_over(RedisMutex& held, RedisMutex& waiter, const LockKeys& keys, RedisClient& raw) {
    std::promise<std::chrono::steady_clock::time_point> got;
    std::thread t([&] {
        waiter.lock();
        got.set_value(std::chrono::steady_clock::now());
        waiter.unlock();
    });
    EXPECT_TRUE(eventually([&] { return raw.command({"ZCARD", keys.mutex_queue()}).integer() == 1; }, 20s));
    const auto released = std::chrono::steady_clock::now();
    held.unlock();
    auto when = got.get_future();
    EXPECT_EQ(when.wait_for(20s), std::future_status::ready);
    t.join();
    return std::chrono::duration_cast<std::chrono::milliseconds>(when.get() - released);
}

TEST(ClusterShardedWakeups, ReleasesStayOnTheLocksShardAndWakeTheWaiterByMessage) {
    ASSERT_TRUE(cluster().wait_until_ok(20s));
    const std::string prefix = test::unique_prefix();
    Side a(prefix), b(prefix);
    const LockKeys keys(prefix, "stock");
    const int slot = redis_cluster_slot(keys.mutex());
    const std::string channel = keys.mutex_channel(b.locks->id());
    ASSERT_EQ(redis_cluster_slot(channel), slot) << "the channel carries the lock's hash tag";
    const int owner = cluster().master_of_slot(slot);
    ASSERT_GE(owner, 0);

    RedisMutex held(*a.locks, "stock", {.lease = 60s});
    RedisMutex waiter(*b.locks, "stock", {.lease = 60s});
    constexpr int kReleases = 10;
    const BusCounters before = bus_counters();
    const auto wakeups_before = b.locks->stats().wakeups;
    for (int i = 0; i < kReleases; ++i) {
        ASSERT_TRUE(held.try_lock());
        const auto took = hand_over(held, waiter, keys, *a.redis);
        EXPECT_LT(took, 10s) << "woken by its 60 s re-check, not by the release message";
    }
    const BusCounters after = bus_counters();
    EXPECT_EQ(b.locks->stats().wakeups - wakeups_before, static_cast<std::uint64_t>(kReleases));
    long long publish = 0;
    for (const auto& [n, count] : after.publish) publish += count - before.publish.at(n);
    EXPECT_EQ(publish, 0) << "no release crossed the cluster bus as a classic PUBLISH";
    for (const auto& [n, count] : after.publishshard) {
        const long long sent = count - before.publishshard.at(n);
        // The owning master forwards each SPUBLISH to its own replica only; nobody else sends.
        EXPECT_EQ(sent, static_cast<int>(n) == owner ? kReleases : 0) << "node " << n;
    }
    EXPECT_EQ(b.redis->subscriber().node_count(), 1u) << "one subscriber connection: the lock's master";
    std::cout << "[ measure  ] " << kReleases << " releases: " << publish << " PUBLISH and "
              << after.publishshard.at(static_cast<std::size_t>(owner)) - before.publishshard.at(static_cast<std::size_t>(owner))
              << " PUBLISHSHARD cluster-bus message(s)\n";

    // The contrast: the same number of classic PUBLISH goes to every other node of the cluster.
    const BusCounters classic_before = bus_counters();
    for (int i = 0; i < kReleases; ++i) a.redis->command({"PUBLISH", channel, "classic"});
    const BusCounters classic_after = bus_counters();
    long long classic = 0;
    for (const auto& [n, count] : classic_after.publish) classic += count - classic_before.publish.at(n);
    EXPECT_EQ(classic, kReleases * static_cast<long long>(cluster().size() - 1));
    std::cout << "[ measure  ] " << kReleases << " classic PUBLISH: " << classic << " cluster-bus message(s)\n";
}

TEST(ClusterShardedWakeups, AfterTheOwningMasterFailsTheWaiterResubscribesAndIsWokenByALaterRelease) {
    ASSERT_TRUE(cluster().wait_until_ok(20s));
    const std::string prefix = test::unique_prefix();
    Side a(prefix), b(prefix);
    const LockKeys keys(prefix, "stock");
    const int slot = redis_cluster_slot(keys.mutex());
    const std::string channel = keys.mutex_channel(b.locks->id());
    const int owner = cluster().master_of_slot(slot);
    ASSERT_GE(owner, 0);
    const int owner_port = cluster().port(static_cast<std::size_t>(owner));

    RedisMutex held(*a.locks, "stock", {.lease = 60s});
    RedisMutex waiter(*b.locks, "stock", {.lease = 60s});
    ASSERT_TRUE(held.try_lock());
    std::promise<std::chrono::steady_clock::time_point> got;
    std::thread t([&] {
        waiter.lock();
        got.set_value(std::chrono::steady_clock::now());
        waiter.unlock();
    });
    ASSERT_TRUE(eventually([&] { return a.redis->command({"ZCARD", keys.mutex_queue()}).integer() == 1; }, 20s));
    ASSERT_EQ(shard_subscribers(owner_port, channel), 1);
    // The hold and the queue reach the replica before the kill (WAIT counts this connection's
    // writes: a write on it first, in the lock's slot).
    {
        RedisOptions o;
        o.port = owner_port;
        RedisConnection conn(o);
        ASSERT_FALSE(conn.command({"SET", keys.stem() + ":probe", "1"}).is_error());
        ASSERT_EQ(conn.command({"WAIT", "1", "10000"}).integer(), 1);
    }
    const auto wakeups_before = b.locks->stats().wakeups;

    cluster().kill(static_cast<std::size_t>(owner));
    ASSERT_TRUE(eventually(
        [&] {
            const int now = cluster().master_of_slot(slot);
            return now >= 0 && now != owner;
        },
        30s));
    const int promoted = cluster().master_of_slot(slot);
    ASSERT_TRUE(cluster().wait_until_ok(30s));
    // The waiter's subscriber found the promoted replica and subscribed there.
    ASSERT_TRUE(eventually([&] { return shard_subscribers(cluster().port(static_cast<std::size_t>(promoted)), channel) == 1; }, 30s));
    ASSERT_TRUE(eventually([&] { return b.redis->subscriber().connected(); }, 30s));
    // Its reconnect listener made it re-check (the lock is still held: it sleeps again).
    ASSERT_TRUE(eventually([&] { return b.locks->stats().wakeups > wakeups_before; }, 30s));
    const auto wakeups_after_move = b.locks->stats().wakeups;

    const auto released = std::chrono::steady_clock::now();
    held.unlock();
    auto when = got.get_future();
    ASSERT_EQ(when.wait_for(20s), std::future_status::ready);
    t.join();
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(when.get() - released);
    EXPECT_LT(took, 10s) << "woken by its 60 s re-check, not by the release message";
    EXPECT_EQ(b.locks->stats().wakeups, wakeups_after_move + 1) << "one wake-up: the release message";
    std::cout << "[ measure  ] after the failover the waiter got the lock " << took.count()
              << " ms after the release\n";

    // Give the node back (it rejoins as a replica) for whatever runs next.
    cluster().start(static_cast<std::size_t>(owner));
    ASSERT_TRUE(cluster().wait_until_ok(30s));
}

}  // namespace
}  // namespace lockstep
