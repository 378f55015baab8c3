// RedisClient on a real Sentinel setup (LocalRedisSentinel: master, replica, 3 sentinels): the
// master is found through the sentinels, a coordinated failover is followed through
// +switch-master before any error, a SIGKILLed master is replaced while a command waits, and an
// unknown master name is a typed error after the wait.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"
#include "lockstep/servers/local_redis_sentinel.h"
#include "redis_fixture.h"

namespace lockstep::test {
namespace {

std::string address(int port) { return "127.0.0.1:" + std::to_string(port); }

std::unique_ptr<RedisClient> client_of(const LocalRedisSentinel& s, std::chrono::milliseconds wait = 20s) {
    RedisOptions o = s.redis_options();
    o.failover_wait = wait;
    return std::make_unique<RedisClient>(o);
}

TEST(RedisSentinel, FindsTheMasterFollowsSwitchMasterAndSurvivesAKilledMaster) {
    LocalRedisSentinel sentinel;
    auto client = client_of(sentinel);
    const std::string k = unique_prefix() + "s";
    EXPECT_EQ(client->sentinel_master(), address(sentinel.port(LocalRedisSentinel::kMaster)));
    client->set(k, "one");
    EXPECT_EQ(client->get(k), "one");
    EXPECT_EQ(client->connection()->command({"WAIT", "1", "2000"}).integer(), 1);

    // Coordinated failover: the old master stays up (as a replica). The client learns of it from
    // +switch-master, without sending a command that would meet READONLY.
    RedisOptions first_sentinel;
    first_sentinel.port = sentinel.port(LocalRedisSentinel::kFirstSentinel);
    RedisClient(first_sentinel).command({"SENTINEL", "FAILOVER", "mymaster"});
    EXPECT_TRUE(eventually([&] { return client->sentinel_master() == address(sentinel.port(LocalRedisSentinel::kReplica)); },
                           15s));
    EXPECT_EQ(client->get(k), "one");
    client->set(k, "two");  // on the new master, not READONLY

    // SIGKILL of the (new) master: the old one, now its replica, is promoted; the command waits.
    // Only once the demoted master has resynced from the new one may the new one be killed
    // without losing "two" (killing it earlier is RACES L8: the promoted node lacks the write).
    ASSERT_TRUE(eventually([&] { return client->connection()->command({"WAIT", "1", "200"}).integer() == 1; }, 40s));
    sentinel.kill(LocalRedisSentinel::kReplica);
    Stopwatch watch;
    EXPECT_EQ(client->get(k), "two");
    EXPECT_LT(watch.elapsed(), 20s);
    EXPECT_EQ(client->sentinel_master(), address(sentinel.port(LocalRedisSentinel::kMaster)));
}

TEST(RedisSentinel, UnknownMasterNameIsATypedErrorAfterTheWait) {
    LocalRedisSentinel sentinel;
    RedisOptions o = sentinel.redis_options();
    o.sentinel_master = "nosuchmaster";
    o.failover_wait = 300ms;
    RedisClient client(o);
    EXPECT_THROW(client.get("k"), ClusterUnavailableError);
}

}  // namespace
}  // namespace lockstep::test
