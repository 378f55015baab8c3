// RACES L8 behind Sentinel: a hold taken on a master that Sentinel then replaces
// may be gone on the promoted replica, so the lock client reports it lost (on_lost, lost()) as
// soon as it learns of the switch (+switch-master), never keeps it silently. Forced with a
// coordinated SENTINEL FAILOVER on LocalRedisSentinel (the key even reached the replica: the
// client cannot know that for certain, so the hold is reported all the same).
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "eventually.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/locks/lock_client.h"
#include "lockstep/locks/redis_mutex.h"
#include "lockstep/servers/local_redis_sentinel.h"
#include "test_servers.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;

using test::eventually;

TEST(SentinelFailover, HoldsOfTheReplacedMasterAreReportedLostAndNewHoldsAreKept) {
    LocalRedisSentinel sentinel;
    RedisOptions o = sentinel.redis_options();
    o.failover_wait = 20s;
    RedisClient redis(o);
    std::mutex mu;
    std::vector<LockLoss> losses;
    LockClientOptions lo;
    lo.prefix = test::unique_prefix();
    lo.on_lost = [&](const LockLoss& l) {
        std::lock_guard g(mu);
        losses.push_back(l);
    };
    RedisLockClient locks(redis, lo);
    RedisMutex held(locks, "stock", {.lease = 60s});
    ASSERT_TRUE(held.try_lock());
    ASSERT_FALSE(held.lost());

    RedisOptions first_sentinel;
    first_sentinel.port = sentinel.port(LocalRedisSentinel::kFirstSentinel);
    RedisClient(first_sentinel).command({"SENTINEL", "FAILOVER", "mymaster"});
    ASSERT_TRUE(eventually(
        [&] {
            std::lock_guard g(mu);
            return !losses.empty();
        },
        30s))
        << "the hold was kept across the master change";
    {
        std::lock_guard g(mu);
        ASSERT_EQ(losses.size(), 1u);
        EXPECT_EQ(losses[0].reason, LockLossReason::Failover);
        EXPECT_EQ(losses[0].name, "stock");
    }
    EXPECT_TRUE(held.lost());
    EXPECT_EQ(redis.sentinel_master(), "127.0.0.1:" + std::to_string(sentinel.port(LocalRedisSentinel::kReplica)));
    EXPECT_NO_THROW(held.unlock());  // reported, never thrown

    // A hold taken on the new master is not touched by the old switch.
    RedisMutex fresh(locks, "stock", {.lease = 60s});
    ASSERT_TRUE(fresh.try_lock_for(20s));
    EXPECT_FALSE(fresh.lost());
    EXPECT_NO_THROW(fresh.unlock_checked());
    std::lock_guard g(mu);
    EXPECT_EQ(losses.size(), 1u);
}

}  // namespace
}  // namespace lockstep
