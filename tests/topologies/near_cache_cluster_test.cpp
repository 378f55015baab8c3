// The near cache on a Redis Cluster (docs/near-cache.md): one invalidation subscriber per master,
// every tracked read sent to the master of its key's slot, the whole near cache dropped when the
// slot map changes, and race C12 when one master's subscriber is lost. Client A is a near cache
// on the cluster (near_cache_test_client.h); client B writes through its own RedisClient, so its
// writes reach A only through the masters' tracking messages.
//
// Forced, never waited for: the slot change is a MIGRATE and CLUSTER SETSLOT by hand; the lost
// invalidation is a write made while one master's subscriber is killed (CLIENT KILL) and its
// resubscription held at the fault point "near.before_subscribe".
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "eventually.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/cache/redis_cluster_slot.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/servers/local_redis_cluster.h"
#include "near_cache_test_client.h"
#include "test_servers.h"
#include "topology_test_support.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;

using test::eventually;
using test::NearCacheClient;
using test::on_node;

// One cluster for this file: 3 masters, no replicas (nothing here fails a master over).
LocalRedisCluster& cluster() {
    static LocalRedisCluster instance(LocalRedisClusterOptions{.masters = 3, .replicas_per_master = 0});
    return instance;
}

RedisOptions cluster_options() {
    RedisOptions o = cluster().redis_options();
    o.failover_wait = 20s;
    return o;
}

int port_of_key(const std::string& key) {
    const int node = cluster().master_of_slot(redis_cluster_slot(key));
    return node < 0 ? 0 : cluster().port(static_cast<std::size_t>(node));
}

// One key per master (port -> key), under a prefix of this test's own (no hash tag: each key
// is its own slot).
std::map<int, std::string> one_key_per_master() {
    std::string prefix = test::unique_prefix();
    std::erase(prefix, '{');
    std::erase(prefix, '}');
    std::map<int, std::string> keys;
    for (int i = 0; i < 1000 && keys.size() < cluster().masters().size(); ++i) {
        const std::string key = prefix + "k" + std::to_string(i);
        keys.emplace(port_of_key(key), key);
    }
    EXPECT_EQ(keys.size(), 3u) << "no key found on every master";
    return keys;
}

void set(RedisClient& b, const std::string& key, const std::string& value) {
    ASSERT_FALSE(b.command({"SET", key, value}).is_error());
}

// Moves `key`'s slot (and the key, with MIGRATE) to another master, as redis-cli --cluster
// reshard does; returns the new owner's port.
int migrate_slot_of(const std::string& key) {
    const int slot = redis_cluster_slot(key);
    const int from_port = port_of_key(key);
    int to_port = 0;
    for (std::size_t m : cluster().masters()) {
        if (cluster().port(m) != from_port) to_port = cluster().port(m);
    }
    EXPECT_NE(to_port, 0);
    const std::string from_id = on_node(from_port, {"CLUSTER", "MYID"}).str();
    const std::string to_id = on_node(to_port, {"CLUSTER", "MYID"}).str();
    EXPECT_FALSE(on_node(to_port, {"CLUSTER", "SETSLOT", std::to_string(slot), "IMPORTING", from_id}).is_error());
    EXPECT_FALSE(on_node(from_port, {"CLUSTER", "SETSLOT", std::to_string(slot), "MIGRATING", to_id}).is_error());
    const RedisReply keys = on_node(from_port, {"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "100"});
    for (const auto& k : keys.elements()) {
        const RedisReply moved = on_node(from_port, {"MIGRATE", "127.0.0.1", std::to_string(to_port), k.str(), "0", "5000"});
        EXPECT_FALSE(moved.is_error()) << moved.error_message();
    }
    // The new owner first, then the old one, then the others (every master must name the new
    // owner before a client asks any of them for the map).
    std::vector<int> order{to_port, from_port};
    for (std::size_t m : cluster().masters()) {
        if (cluster().port(m) != to_port && cluster().port(m) != from_port) order.push_back(cluster().port(m));
    }
    for (int port : order) {
        EXPECT_FALSE(on_node(port, {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE", to_id}).is_error());
    }
    return to_port;
}

TEST(NearCacheClusterTest, EachMastersKeysAreInvalidatedThroughThatMastersSubscriber) {
    ASSERT_TRUE(cluster().wait_until_ok(20s));
    const auto keys = one_key_per_master();
    RedisClient b(cluster_options());
    NearCacheClient a(cluster_options());
    EXPECT_EQ(a.channel.connects(), 3u) << "one subscriber per master";
    for (const auto& [port, key] : keys) {
        // The subscriber serving the key is a client of the key's own master.
        const std::string clients = on_node(port, {"CLIENT", "LIST"}).str();
        EXPECT_NE(clients.find("id=" + std::to_string(a.channel.subscriber_id(key)) + " "), std::string::npos);
        set(b, key, "v1");
        ASSERT_TRUE(a.hold(key, "v1")) << key;
    }
    ASSERT_EQ(a.local.stats().entries, 3u);
    const auto before = a.local.stats();

    for (const auto& [port, key] : keys) set(b, key, "v2");
    EXPECT_TRUE(eventually([&] { return a.local.stats().entries == 0; }, 10s))
        << "entries left: " << a.local.stats().entries;
    const auto after = a.local.stats();
    EXPECT_GE(after.invalidations, before.invalidations + 3);
    EXPECT_EQ(after.drops, before.drops) << "each key was invalidated by its master, nothing was dropped";
    for (const auto& [port, key] : keys) EXPECT_EQ(a.read_and_fill(key), "v2");
}

TEST(NearCacheClusterTest, AMovedSlotDropsTheNearCacheAndItsKeyIsTrackedOnTheNewOwner) {
    ASSERT_TRUE(cluster().wait_until_ok(20s));
    const auto keys = one_key_per_master();
    RedisClient b(cluster_options());
    NearCacheClient a(cluster_options());
    for (const auto& [port, key] : keys) {
        set(b, key, "v1");
        ASSERT_TRUE(a.hold(key, "v1")) << key;
    }
    const std::string moved = keys.begin()->second;
    const auto drops = a.local.stats().drops;
    const auto changes = a.channel.topology_changes();

    const int new_owner = migrate_slot_of(moved);
    ASSERT_NE(new_owner, keys.begin()->first);
    // A's channel asks for the map every second: the change is seen without any read.
    ASSERT_TRUE(eventually([&] { return a.channel.topology_changes() > changes; }, 10s));
    EXPECT_GT(a.local.stats().drops, drops);
    EXPECT_EQ(a.local.stats().entries, 0u) << "the whole near cache was dropped";

    // B's write reaches the new owner; A reads it there and holds it, tracked there.
    set(b, moved, "v2");
    ASSERT_EQ(b.cluster_master_of(moved), "127.0.0.1:" + std::to_string(new_owner));
    ASSERT_TRUE(a.hold(moved, "v2"));
    EXPECT_NE(a.channel.subscriber_id(moved), 0);
    const auto drops_after_move = a.local.stats().drops;
    set(b, moved, "v3");
    EXPECT_TRUE(eventually([&] { return !a.local_value(moved).has_value(); }, 10s))
        << "the new owner announced B's write to A's subscriber on it";
    EXPECT_EQ(a.local.stats().drops, drops_after_move);
    EXPECT_EQ(a.read_and_fill(moved), "v3");
}

// C12 on a cluster: a write on one master while that master's subscriber is gone is never
// announced; the drop rule empties the whole near cache (every master's keys), so A reads the
// new value. Without the rule, A serves the old one.
class NearCacheClusterC12Test : public ::testing::TestWithParam<bool> {};

TEST_P(NearCacheClusterC12Test, AnInvalidationLostWhileOneMastersSubscriberIsDown) {
    const bool drop_rule = GetParam();
    ASSERT_TRUE(cluster().wait_until_ok(20s));
    const auto keys = one_key_per_master();
    RedisClient b(cluster_options());
    NearCacheClient a(cluster_options(), drop_rule);
    for (const auto& [port, key] : keys) {
        set(b, key, "v1");
        ASSERT_TRUE(a.hold(key, "v1")) << key;
    }
    const auto [port, key] = *keys.begin();
    const auto connects = a.channel.connects();
    const auto drops = a.local.stats().drops;

    fault::Gate resubscribe;
    auto armed = fault::arm("near.before_subscribe", resubscribe.action());
    ASSERT_FALSE(on_node(port, {"CLIENT", "KILL", "ID", std::to_string(a.channel.subscriber_id(key))}).is_error());
    ASSERT_TRUE(resubscribe.wait_arrivals(1, 10s)) << "the subscriber did not try to reconnect";
    EXPECT_FALSE(a.channel.intact());
    set(b, key, "v2");  // its invalidation goes to a client that no longer exists
    resubscribe.open();
    ASSERT_TRUE(eventually([&] { return a.channel.intact() && a.channel.connects() == connects + 1; }, 10s));
    armed.disarm();

    EXPECT_GT(a.local.stats().drops, drops);
    if (drop_rule) {
        EXPECT_EQ(a.local.stats().entries, 0u) << "C12 closed: every master's entries were dropped";
        EXPECT_FALSE(a.local_value(key).has_value());
        EXPECT_TRUE(a.hold(key, "v2"));
    } else {
        EXPECT_EQ(a.local_value(key), "v1") << "C12 reproduced: the lost invalidation leaves the old value";
        EXPECT_EQ(a.local.stats().entries, 3u);
    }
}

INSTANTIATE_TEST_SUITE_P(DropRule, NearCacheClusterC12Test, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? std::string("On") : std::string("Off"); });

}  // namespace
}  // namespace lockstep
