// A full flush on a Redis Cluster: an entity's keys are spread over every master (their hash tag
// is `{entity:id}`), and SCAN walks only the node it is sent to, so the follower scans every
// master (invalidation/src/key_scan.h). Forced with a statement-format UPDATE (no row images:
// the follower must flush the whole entity) against a private 3-master cluster; every key of the
// entity, on whichever master, is gone, and keys outside the entity's pattern stay.
#include <gtest/gtest.h>

#include <set>

#include "invalidation_test_support.h"
#include "lockstep/servers/local_redis_cluster.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

TEST(ClusterFlush, AStatementFormatChangeFlushesTheEntityOnEveryMaster) {
    LocalRedisClusterOptions co;
    co.masters = 3;
    co.replicas_per_master = 0;
    LocalRedisCluster cluster(co);
    RedisClient cluster_redis(cluster.redis_options());

    const std::string prefix = fresh_prefix();
    const InvalidationMap map = products_map(prefix);
    std::vector<std::string> keys;
    std::set<std::string> masters;
    for (int i = 0; i < 60; ++i) {
        std::string key = map.key(map.bindings()[0], 1000 + i);
        cluster_redis.set(key, "v1:x", 60s);
        masters.insert(cluster_redis.cluster_master_of(key));
        keys.push_back(key);
    }
    ASSERT_EQ(masters.size(), 3u) << "the entity's keys must be spread over every master for this test";
    const std::string other = prefix + "{lock:1}";  // not the entity's: must survive
    cluster_redis.set(other, "x", 60s);

    const std::int64_t id = fresh_id();
    db().execute("INSERT INTO products (id, name, price, stock, version) VALUES (?, 'cl', 1, 1, 1)", {id});
    BinlogInvalidatorOptions o = follower_options("cluster-" + prefix);
    BinlogInvalidator follower(servers().mysql_options(), cluster_redis, map, o);
    follower.start();
    ASSERT_TRUE(follower.wait_caught_up(20s));
    mariadb_client("SET SESSION binlog_format = 'STATEMENT'; UPDATE products SET price = 2 WHERE id = " +
                   std::to_string(id));
    ASSERT_TRUE(eventually([&] { return follower.metrics().flushes >= 1; }, 20s));
    std::size_t left = 0;
    for (const auto& k : keys) left += static_cast<std::size_t>(cluster_redis.command({"EXISTS", k}).integer());
    EXPECT_EQ(left, 0u) << "keys of the flushed entity survived on some master";
    EXPECT_GE(follower.metrics().flushed_keys, keys.size());
    EXPECT_EQ(cluster_redis.command({"EXISTS", other}).integer(), 1);
    follower.stop();
    db().execute("DELETE FROM products WHERE id = ?", {id});
}

}  // namespace
}  // namespace lockstep::test
