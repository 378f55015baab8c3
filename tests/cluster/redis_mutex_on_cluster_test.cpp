// The locks on a real 3-master Redis Cluster (LocalRedisCluster): the 20-name RedisMutex case of
// once found (12 of 20 names failed with MOVED before the client routed), contention with a
// release waking a waiter of another client whatever node its slot lives on, and fencing tokens
// that keep increasing across a failover of the lock's master.
//
// Wake-ups are sharded (SPUBLISH from the lock scripts, SSUBSCRIBE on the master owning the
// lock's slot; docs/cache.md "Pub/sub in a cluster", measured in tests/topologies).
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "lockstep/cache/redis_client.h"
#include "lockstep/cache/redis_cluster_slot.h"
#include "lockstep/locks/lock_client.h"
#include "lockstep/locks/lock_service.h"
#include "lockstep/locks/redis_mutex.h"
#include "lockstep/servers/local_redis_cluster.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;

LocalRedisCluster& cluster() {
    static LocalRedisCluster instance;
    return instance;
}

std::string prefix() { return "cl" + std::to_string(::getpid()) + ":"; }

struct ClusterLockClient {
    ClusterLockClient() {
        RedisOptions o = cluster().redis_options();
        o.failover_wait = 15s;
        redis = std::make_unique<RedisClient>(o);
        LockClientOptions lo;
        lo.prefix = prefix();
        locks = std::make_unique<RedisLockClient>(*redis, lo);
    }
    std::unique_ptr<RedisClient> redis;
    std::unique_ptr<RedisLockClient> locks;
};

TEST(RedisMutexOnCluster, TwentyNamesLockAndUnlockOnEveryMaster) {
    ASSERT_TRUE(cluster().wait_until_ok(20s));
    ClusterLockClient c;
    std::set<std::string> masters;
    for (int i = 0; i < 20; ++i) {
        const std::string name = "product:" + std::to_string(i);
        RedisMutex m(*c.locks, name);
        m.lock();
        EXPECT_GT(m.fence_token(), 0);
        EXPECT_TRUE(m.try_lock());  // reentrant
        m.unlock();
        m.unlock();
        masters.insert(c.redis->cluster_master_of(prefix() + "{" + name + "}:lock"));
    }
    EXPECT_EQ(masters.size(), 3u) << "the 20 names should cover every master";
}

TEST(RedisMutexOnCluster, AReleaseWakesAWaiterOfAnotherClientOnEveryMaster) {
    ASSERT_TRUE(cluster().wait_until_ok(20s));
    ClusterLockClient a;
    ClusterLockClient b;
    for (int i = 0; i < 6; ++i) {
        const std::string name = "wake:" + std::to_string(i);
        RedisMutex ma(*a.locks, name, {.lease = 30s});
        RedisMutex mb(*b.locks, name, {.lease = 30s});
        ma.lock();
        EXPECT_FALSE(mb.try_lock());
        auto waiter = std::async(std::launch::async, [&] {
            const auto start = std::chrono::steady_clock::now();
            mb.lock();
            const auto waited = std::chrono::steady_clock::now() - start;
            mb.unlock();
            return waited;
        });
        // The waiter is queued once the lock's queue has its entry; then release.
        const std::string queue = prefix() + "{" + name + "}:lock:q";
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        while (a.redis->command({"ZCARD", queue}).integer() == 0 && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(2ms);
        }
        const long long before = b.locks->stats().wakeups;
        ma.unlock();
        ASSERT_EQ(waiter.wait_for(10s), std::future_status::ready);
        // Woken by the message, not by its 30 s re-check.
        EXPECT_LT(waiter.get(), 5s);
        EXPECT_GT(b.locks->stats().wakeups, static_cast<std::uint64_t>(before));
    }
}

// "Any lockstep program works unchanged when given a cluster URL": the lock service
// URL of a program (repository options, the conformance backends, the demo) opens on a cluster
// too. Before, open_lock_service knew only redis:// and redis-fair:// (ConfigError "unknown
// scheme 'redis+cluster'"), and redis-fair's opener dropped a "+cluster" from the scheme.
TEST(RedisMutexOnCluster, LockServiceUrlsWithTheClusterSchemeOpenAndLockOnEveryMaster) {
    ASSERT_TRUE(cluster().wait_until_ok(20s));
    const std::string url = cluster().url();
    ASSERT_EQ(url.rfind("redis+cluster://", 0), 0u) << url;
    RedisClient probe(cluster().redis_options());
    for (const std::string scheme : {"redis", "redis-fair"}) {
        auto service = open_lock_service(scheme + url.substr(5), {.prefix = prefix() + "svc:"});
        EXPECT_EQ(service->backend(), scheme);
        std::set<std::string> masters;
        for (int i = 0; i < 20; ++i) {
            const std::string name = scheme + ":" + std::to_string(i);
            auto a = service->make_mutex(name);
            a->lock();
            // A second service on the same URL (another process's view) finds it held.
            auto other = open_lock_service(scheme + url.substr(5), {.prefix = prefix() + "svc:"});
            auto b = other->make_mutex(name);
            EXPECT_FALSE(b->try_lock()) << scheme << " " << name;
            a->unlock();
            ASSERT_TRUE(b->try_lock()) << scheme << " " << name;
            b->unlock();
            masters.insert(probe.cluster_master_of(prefix() + "svc:{" + name + "}:lock"));
        }
        EXPECT_EQ(masters.size(), 3u) << scheme << ": the 20 names should cover every master";
    }
}

TEST(RedisMutexOnCluster, FencingTokensKeepIncreasingAcrossAFailoverOfTheLocksMaster) {
    ASSERT_TRUE(cluster().wait_until_ok(20s));
    ClusterLockClient c;
    const std::string name = "fenced";
    long long last = 0;
    {
        RedisMutex m(*c.locks, name);
        std::scoped_lock hold(m);
        last = m.fence_token();
    }
    // Replicate the counter, then kill its master: the promoted replica continues from it.
    const std::string fence = prefix() + "{" + name + "}:fence";
    EXPECT_EQ(c.redis->connection_for_key(fence)->command({"WAIT", "1", "2000"}).integer(), 1);
    const int victim = cluster().master_of_slot(redis_cluster_slot(fence));
    ASSERT_GE(victim, 0);
    cluster().kill(static_cast<std::size_t>(victim));
    {
        RedisMutex m(*c.locks, name);
        std::scoped_lock hold(m);  // waits out the failover inside the client
        EXPECT_GT(m.fence_token(), last);
    }
    cluster().start(static_cast<std::size_t>(victim));
    EXPECT_TRUE(cluster().wait_until_ok(20s));
}

}  // namespace
}  // namespace lockstep
