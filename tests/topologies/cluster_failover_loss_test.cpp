// RACES L8 on a Cluster: a hold whose key's slot is on a cluster shard whose
// master is replaced (SIGKILL, replica promoted) may be gone on the promoted replica, so the lock
// client reports it lost (on_lost, lost()) as soon as its router's map shows the new master (the
// router's watch thread asks for the map every second), not at the hold's next renewal. A hold
// on another shard is not touched and keeps renewing. A slot migrated to another master
// (MIGRATE moves the key with its TTL) is not a failover: its hold is kept and still renews.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

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
using Clock = std::chrono::steady_clock;

using test::eventually;
using test::on_node;

// One cluster for this file (3 masters, one replica each); the failover test runs last and
// gives the killed node back.
LocalRedisCluster& cluster() {
    static LocalRedisCluster instance;
    return instance;
}

// test::unique_prefix() without its braces: a braced prefix would be every key's hash tag (one
// slot for every name); here each lock name must be its own tag, on its own slot.
std::string untagged_prefix() {
    std::string p = test::unique_prefix();
    std::erase(p, '{');
    std::erase(p, '}');
    return p;
}

std::string node_id(int port) { return on_node(port, {"CLUSTER", "MYID"}).str(); }

// A lock name (under `prefix`) whose keys are served by master node `want` (any other master
// when `other_than` >= 0 and want < 0).
std::string name_on(const std::string& prefix, int want, int other_than = -1) {
    for (int i = 0; i < 1000; ++i) {
        const std::string name = "stock" + std::to_string(i);
        const int owner = cluster().master_of_slot(redis_cluster_slot(LockKeys(prefix, name).mutex()));
        if (owner < 0) continue;
        if ((want >= 0 && owner == want) || (want < 0 && owner != other_than)) return name;
    }
    ADD_FAILURE() << "no lock name on the wanted master " << want << " / other than " << other_than << "; stock0 on "
                  << cluster().master_of_slot(redis_cluster_slot(LockKeys(prefix, "stock0").mutex()));
    return {};
}

struct Client : test::LockClientOnTopology {
    explicit Client(const std::string& prefix) : LockClientOnTopology(cluster().redis_options(), prefix) {}
};

TEST(ClusterFailoverLoss, AMigratedSlotIsNotAFailoverItsHoldIsKeptAndRenews) {
    ASSERT_TRUE(cluster().wait_until_ok(20s));
    const std::string prefix = untagged_prefix();
    Client c(prefix);
    const std::string name = name_on(prefix, -1);
    const std::string key = LockKeys(prefix, name).mutex();
    const int slot = redis_cluster_slot(key);
    const int from = cluster().master_of_slot(slot);
    ASSERT_GE(from, 0);
    int to = -1;
    for (std::size_t m : cluster().masters()) {
        if (static_cast<int>(m) != from) to = static_cast<int>(m);
    }
    ASSERT_GE(to, 0);
    const int from_port = cluster().port(static_cast<std::size_t>(from));
    const int to_port = cluster().port(static_cast<std::size_t>(to));

    RedisMutex held(*c.locks, name, {.lease = 3s});  // renewed every second
    ASSERT_TRUE(held.try_lock());
    ASSERT_EQ(c.redis->cluster_master_of(key), "127.0.0.1:" + std::to_string(from_port));

    // Resharding by hand, as redis-cli --cluster reshard does it: the key moves with MIGRATE.
    const std::string from_id = node_id(from_port), to_id = node_id(to_port);
    ASSERT_FALSE(on_node(to_port, {"CLUSTER", "SETSLOT", std::to_string(slot), "IMPORTING", from_id}).is_error());
    ASSERT_FALSE(on_node(from_port, {"CLUSTER", "SETSLOT", std::to_string(slot), "MIGRATING", to_id}).is_error());
    const RedisReply keys = on_node(from_port, {"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "100"});
    for (const auto& k : keys.elements()) {
        const RedisReply moved =
            on_node(from_port, {"MIGRATE", "127.0.0.1", std::to_string(to_port), k.str(), "0", "5000"});
        ASSERT_FALSE(moved.is_error()) << moved.error_message();
    }
    // The new owner first, then the old one, then every other master (the router asks the
    // masters it knows for the map: none of them may still name the old owner).
    std::vector<int> order{to_port, from_port};
    for (std::size_t m : cluster().masters()) {
        if (cluster().port(m) != to_port && cluster().port(m) != from_port) order.push_back(cluster().port(m));
    }
    for (int port : order) {
        ASSERT_FALSE(on_node(port, {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", to_id}).is_error());
    }
    c.redis->refresh_topology();
    ASSERT_EQ(c.redis->cluster_master_of(key), "127.0.0.1:" + std::to_string(to_port));

    // The hold renews on its new master (several renewals: the lease of 3 s is long over) and
    // was never reported lost.
    const auto renewals = c.locks->stats().renewals;
    ASSERT_TRUE(eventually([&] { return c.locks->stats().renewals >= renewals + 3; }, 20s));
    EXPECT_TRUE(c.reported().empty());
    EXPECT_FALSE(held.lost());
    EXPECT_NO_THROW(held.unlock_checked());  // the key was on the new master, with our owner
    EXPECT_TRUE(c.reported().empty());
}

TEST(ClusterFailoverLoss, HoldsOnTheFailedShardAreReportedLostAtOnceOthersKeepRenewing) {
    ASSERT_TRUE(cluster().wait_until_ok(20s));
    const std::string prefix = untagged_prefix();
    // Client `a` sends nothing while the master fails (its holds' renewals are 20 s away, lease
    // 60 s): only its router's watch thread can learn of the failover in time. (Any command
    // during the failover window would refresh the map too: the cluster answers CLUSTERDOWN.)
    // Client `b` renews every 2 s on another shard.
    Client a(prefix), b(prefix + "b");  // b's keys: other keys, the same slots (the tag is the name)
    const std::string doomed_name = name_on(prefix, -1);
    const int slot = redis_cluster_slot(LockKeys(prefix, doomed_name).mutex());
    const int owner = cluster().master_of_slot(slot);
    ASSERT_GE(owner, 0);
    const std::string other_name = name_on(prefix, -1, owner);
    RedisMutex doomed(*a.locks, doomed_name, {.lease = 60s});
    RedisMutex other(*a.locks, other_name, {.lease = 60s});  // a's hold on another shard
    RedisMutex safe(*b.locks, other_name, {.lease = 6s});
    ASSERT_TRUE(doomed.try_lock());
    ASSERT_TRUE(other.try_lock());
    ASSERT_TRUE(safe.try_lock());

    const auto killed_at = Clock::now();
    cluster().kill(static_cast<std::size_t>(owner));
    ASSERT_TRUE(eventually(
        [&] {
            const int now = cluster().master_of_slot(slot);
            return now >= 0 && now != owner;
        },
        30s));
    const auto promoted_at = Clock::now();
    // Reported within a few seconds of the promotion (the watch thread asks every second; the
    // hold's own renewal would find it only ~20 s after it was taken).
    ASSERT_TRUE(eventually([&] { return !a.reported().empty(); }, 8s))
        << "the hold on the failed shard was not reported lost within 8 s of the promotion";
    const auto reported_at = Clock::now();
    {
        const auto losses = a.reported();
        ASSERT_EQ(losses.size(), 1u);
        EXPECT_EQ(losses[0].reason, LockLossReason::Failover);
        EXPECT_EQ(losses[0].name, doomed_name);
    }
    EXPECT_TRUE(doomed.lost());
    EXPECT_FALSE(other.lost());
    std::cout << "[ measure  ] kill -> promotion seen "
              << std::chrono::duration_cast<std::chrono::milliseconds>(promoted_at - killed_at).count()
              << " ms, -> loss reported "
              << std::chrono::duration_cast<std::chrono::milliseconds>(reported_at - killed_at).count() << " ms\n";

    // The hold on the other shard keeps renewing and is never reported; b's router saw the
    // same failover (its renewals met CLUSTERDOWN, and its watch thread runs).
    ASSERT_TRUE(eventually([&] { return b.redis->cluster_master_of(LockKeys(prefix, doomed_name).mutex()) ==
                                        "127.0.0.1:" + std::to_string(cluster().port(static_cast<std::size_t>(
                                                           cluster().master_of_slot(slot)))); },
                           20s));
    const auto renewals = b.locks->stats().renewals;
    ASSERT_TRUE(eventually([&] { return b.locks->stats().renewals >= renewals + 2; }, 20s));
    EXPECT_FALSE(safe.lost());
    EXPECT_NO_THROW(safe.unlock_checked());
    EXPECT_TRUE(b.reported().empty());
    EXPECT_FALSE(other.lost());
    EXPECT_NO_THROW(other.unlock_checked());
    EXPECT_NO_THROW(doomed.unlock());  // reported, never thrown
    EXPECT_EQ(a.reported().size(), 1u);

    // Give the node back (it rejoins as the promoted master's replica), so a repeat finds every
    // master with a replica.
    cluster().start(static_cast<std::size_t>(owner));
    ASSERT_TRUE(cluster().wait_until_ok(30s));
}

}  // namespace
}  // namespace lockstep
