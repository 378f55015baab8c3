// The near cache behind Sentinel (docs/near-cache.md): the invalidation subscriber and the tracked
// readers live on the master in use; a switch (SENTINEL FAILOVER, forced) drops the whole near
// cache and re-makes them on the new master, so a write after the switch still invalidates client
// A's entry. Client B writes through its own RedisClient.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "eventually.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/servers/local_redis_sentinel.h"
#include "near_cache_test_client.h"
#include "test_servers.h"
#include "topology_test_support.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;

using test::eventually;
using test::NearCacheClient;
using test::on_node;

bool has_near_subscriber(int port) {
    return on_node(port, {"CLIENT", "LIST"}).str().find("name=lockstep-near-subscriber ") != std::string::npos;
}

TEST(NearCacheSentinelTest, ASwitchDropsTheNearCacheAndAWriteToTheNewMasterInvalidates) {
    LocalRedisSentinel sentinel;
    RedisOptions o = sentinel.redis_options();
    o.failover_wait = 20s;
    RedisClient b(o);
    NearCacheClient a(o);
    const int old_master = sentinel.port(LocalRedisSentinel::kMaster);
    const int new_master = sentinel.port(LocalRedisSentinel::kReplica);
    ASSERT_TRUE(has_near_subscriber(old_master));
    const std::string key = test::unique_prefix() + "price";

    ASSERT_FALSE(b.command({"SET", key, "v1"}).is_error());
    ASSERT_TRUE(a.hold(key, "v1"));
    ASSERT_FALSE(b.command({"SET", key, "v2"}).is_error());
    ASSERT_TRUE(eventually([&] { return !a.local_value(key).has_value(); }, 10s)) << "invalidated on the first master";
    ASSERT_TRUE(a.hold(key, "v2"));
    const auto drops = a.local.stats().drops;

    RedisOptions first_sentinel;
    first_sentinel.port = sentinel.port(LocalRedisSentinel::kFirstSentinel);
    RedisClient(first_sentinel).command({"SENTINEL", "FAILOVER", "mymaster"});
    ASSERT_TRUE(eventually([&] { return a.channel.topology_changes() >= 1; }, 30s)) << "the switch was not seen";
    EXPECT_GT(a.local.stats().drops, drops);
    EXPECT_FALSE(a.local_value(key).has_value()) << "the whole near cache was dropped";
    ASSERT_TRUE(eventually([&] { return a.channel.intact(); }, 20s));
    EXPECT_TRUE(has_near_subscriber(new_master)) << "the subscriber moved to the new master";

    // B's router follows the switch too; its write lands on the new master.
    ASSERT_TRUE(eventually([&] { return b.sentinel_master() == "127.0.0.1:" + std::to_string(new_master); }, 30s));
    ASSERT_FALSE(b.command({"SET", key, "v3"}).is_error());
    ASSERT_TRUE(a.hold(key, "v3"));
    const auto drops_after_switch = a.local.stats().drops;
    ASSERT_FALSE(b.command({"SET", key, "v4"}).is_error());
    EXPECT_TRUE(eventually([&] { return !a.local_value(key).has_value(); }, 10s))
        << "the new master announced B's write to A's subscriber on it";
    EXPECT_EQ(a.local.stats().drops, drops_after_switch) << "an invalidation, not a drop";
    EXPECT_EQ(a.read_and_fill(key), "v4");
}

}  // namespace
}  // namespace lockstep
