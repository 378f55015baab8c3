// Sentinel over TLS (rediss+sentinel://, docs/tls.md) on a private master, replica and three
// sentinels that all serve TLS (LocalRedisSentinel with tls): the client asks the sentinels over
// TLS, reaches the master they name on its TLS port over TLS, and after a SENTINEL FAILOVER
// follows +switch-master to the promoted replica, again over TLS; a lock cycle works on both
// masters. A CA that did not sign the sentinels is a typed error naming the cause, at once.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "eventually.h"
#include "lockstep/cache/redis_cache.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"
#include "lockstep/locks/lock_client.h"
#include "lockstep/locks/redis_mutex.h"
#include "lockstep/servers/local_redis_sentinel.h"
#include "test_servers.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string address(int port) { return "127.0.0.1:" + std::to_string(port); }

// One TLS setup for this file's tests, started on first use (the failover test runs first and
// expects the first master).
LocalRedisSentinel& tls_sentinel() {
    static LocalRedisSentinel instance(LocalRedisSentinelOptions{.tls = true});
    return instance;
}

// One exclusion cycle between two lock clients of the same Redis.
void lock_cycle(RedisLockClient& first, RedisLockClient& second, const std::string& name) {
    RedisMutex a(first, name, {.lease = 30s});
    RedisMutex b(second, name, {.lease = 30s});
    ASSERT_TRUE(a.try_lock());
    EXPECT_FALSE(b.try_lock()) << "held over TLS, yet granted to another client";
    a.unlock_checked();
    ASSERT_TRUE(b.try_lock());
    b.unlock_checked();
}

TEST(TlsSentinelTest, ARoundTripAndALockCycleWorkBeforeAndAfterAFailoverAllOverTls) {
    LocalRedisSentinel& sentinel = tls_sentinel();
    RedisOptions o = sentinel.redis_options();
    ASSERT_TRUE(o.tls.enabled);
    o.failover_wait = 20s;
    RedisClient client(o);
    RedisClient other(o);
    LockClientOptions lo;
    lo.prefix = unique_lock_prefix();
    RedisLockClient first(client, lo);
    RedisLockClient second(other, lo);
    RedisCache cache(client);
    const std::string k = unique_prefix() + "tls";

    // The sentinels name the master's TLS port (tls-replication), and the client connects there.
    EXPECT_EQ(client.sentinel_master(), address(sentinel.tls_port(LocalRedisSentinel::kMaster)));
    cache.set(k, "one", 60s);
    EXPECT_EQ(cache.get(k), "one");
    lock_cycle(first, second, "before");
    EXPECT_EQ(client.connection()->command({"WAIT", "1", "2000"}).integer(), 1) << "the replica missed the write";

    // Asked on a sentinel's plain port (the harness's side door).
    RedisOptions first_sentinel;
    first_sentinel.port = sentinel.port(LocalRedisSentinel::kFirstSentinel);
    RedisClient(first_sentinel).command({"SENTINEL", "FAILOVER", "mymaster"});
    const std::string promoted = address(sentinel.tls_port(LocalRedisSentinel::kReplica));
    ASSERT_TRUE(eventually([&] { return client.sentinel_master() == promoted; }, 20s))
        << "the client stayed on " << client.sentinel_master();

    // New connections to the promoted replica, over TLS, verified against 127.0.0.1.
    EXPECT_EQ(cache.get(k), "one");
    cache.set(k, "two", 60s);  // a write: the new master, not READONLY
    EXPECT_EQ(cache.get(k), "two");
    ASSERT_TRUE(eventually([&] { return other.sentinel_master() == promoted; }, 20s));
    lock_cycle(first, second, "after");
    EXPECT_TRUE(cache.remove(k));
}

TEST(TlsSentinelTest, ACaThatDidNotSignTheSentinelsIsAConfigErrorNamingTheCauseWithoutWaiting) {
    LocalRedisSentinel& sentinel = tls_sentinel();
    RedisOptions o = sentinel.redis_options();
    o.tls.ca_file = sentinel.tls_certificates().foreign_ca_file;
    o.failover_wait = 20s;
    const auto start = Clock::now();
    RedisClient client(o);
    try {
        client.get("k");
        ADD_FAILURE() << "connected with a CA that did not sign the sentinels";
    } catch (const ConfigError& e) {
        EXPECT_EQ(e.part(), "server certificate") << e.what();
        EXPECT_NE(std::string(e.what()).find("the server's certificate failed verification"), std::string::npos)
            << e.what();
    }
    EXPECT_LT(Clock::now() - start, 5s) << "waited for a failover that cannot fix a certificate";
}

}  // namespace
}  // namespace lockstep::test
