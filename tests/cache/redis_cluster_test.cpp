// RedisClient on a real 3-master Redis Cluster (LocalRedisCluster, one replica per master):
// slots and hash tags, routing of commands, pipelines and scripts across masters, MOVED after a
// failover the client did not see, ASK during a slot migration, a master killed mid-run, and a
// cluster that stays down long enough to be a typed error.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "lockstep/cache/redis_client.h"
#include "lockstep/cache/redis_cluster_slot.h"
#include "lockstep/core/error.h"
#include "lockstep/servers/local_redis_cluster.h"
#include "redis_fixture.h"

namespace lockstep::test {
namespace {

// One cluster for this binary's cluster tests, started on first use (~3 s), stopped at exit.
LocalRedisCluster& cluster() {
    static LocalRedisCluster instance;
    return instance;
}

// A direct client of one node (no routing), for checking where a key really is.
std::unique_ptr<RedisClient> node_client(int port) {
    RedisOptions o;
    o.port = port;
    return std::make_unique<RedisClient>(o);
}

std::string node_id(int port) { return node_client(port)->command({"CLUSTER", "MYID"}).str(); }

int port_of(const std::string& address) { return std::stoi(address.substr(address.rfind(':') + 1)); }

class RedisClusterTest : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(cluster().wait_until_ok(20s));
        RedisOptions o = cluster().redis_options();
        o.failover_wait = 15s;
        client_ = std::make_unique<RedisClient>(o);
        prefix_ = unique_prefix();
    }
    std::string key(const std::string& name) const { return prefix_ + name; }
    std::string untagged(const std::string& name) const { return "t" + std::to_string(::getpid()) + ":" + name + prefix_.substr(1, prefix_.size() - 3); }

    std::unique_ptr<RedisClient> client_;
    std::string prefix_;
};

TEST(RedisClusterSlot, MatchesTheSlotsRedisComputes) {
    EXPECT_EQ(redis_crc16("123456789"), 0x31C3u);  // the CRC16/XMODEM check value
    EXPECT_EQ(redis_cluster_slot("foo"), 12182);
    EXPECT_EQ(redis_cluster_slot("{user1000}.following"), redis_cluster_slot("{user1000}.followers"));
    EXPECT_EQ(redis_cluster_slot("a{user1000}b"), redis_cluster_slot("user1000"));
    EXPECT_EQ(redis_cluster_slot("foo{}{bar}"), redis_cluster_slot("foo{}{bar}"));
    EXPECT_NE(redis_cluster_slot("{}foo"), redis_cluster_slot("foo"));  // empty tag: whole key
    EXPECT_EQ(redis_cluster_slot("foo{{bar}}zap"), redis_cluster_slot("{bar"));
    EXPECT_EQ(redis_command_slot({"EVALSHA", "abc", "2", "{x}a", "{x}b"}), redis_cluster_slot("x"));
    EXPECT_EQ(redis_command_slot({"EVALSHA", "abc", "0"}), std::nullopt);
    EXPECT_EQ(redis_command_slot({"PING"}), std::nullopt);
    EXPECT_EQ(redis_command_slot({"PUBLISH", "ch", "m"}), std::nullopt);
    EXPECT_EQ(redis_command_slot({"get", "foo"}), 12182);
}

TEST_F(RedisClusterTest, SlotsAgreeWithClusterKeyslot) {
    for (const std::string k : {"foo", "bar", "{tag}x", "x{tag}", "", "{}", "a{b}c{d}", "\xff\x00"}) {
        EXPECT_EQ(client_->command({"CLUSTER", "KEYSLOT", k}).integer(), redis_cluster_slot(k)) << k;
    }
}

TEST_F(RedisClusterTest, KeysSpreadOverEveryMasterAndEachIsWhereItsSlotSays) {
    std::set<std::string> masters;
    for (int i = 0; i < 30; ++i) {
        const std::string k = untagged("k" + std::to_string(i));
        client_->set(k, "v" + std::to_string(i), 60s);
        EXPECT_EQ(client_->get(k), "v" + std::to_string(i));
        const std::string master = client_->cluster_master_of(k);
        masters.insert(master);
        // Without routing, the master of the slot has it (and answers GET without MOVED).
        EXPECT_EQ(node_client(port_of(master))->get(k), "v" + std::to_string(i));
    }
    EXPECT_EQ(masters.size(), 3u);
}

TEST_F(RedisClusterTest, PipelineAcrossMastersIsAnsweredInOrder) {
    std::vector<std::vector<std::string>> commands;
    for (int i = 0; i < 12; ++i) commands.push_back({"SET", untagged("p" + std::to_string(i)), std::to_string(i), "PX", "60000"});
    for (int i = 0; i < 12; ++i) commands.push_back({"GET", untagged("p" + std::to_string(i))});
    const auto replies = client_->pipeline(commands);
    ASSERT_EQ(replies.size(), 24u);
    for (int i = 0; i < 12; ++i) {
        EXPECT_EQ(replies[i].str(), "OK");
        EXPECT_EQ(replies[12 + i].str(), std::to_string(i));
    }
}

TEST_F(RedisClusterTest, ScriptsAreLoadedOnEachNodeAfterAFlush) {
    static const RedisScript incr_by("return redis.call('INCRBY', KEYS[1], ARGV[1])");
    for (std::size_t n = 0; n < cluster().size(); ++n) node_client(cluster().port(n))->command({"SCRIPT", "FLUSH"});
    for (int i = 0; i < 9; ++i) {
        const std::string k = untagged("s" + std::to_string(i));
        EXPECT_EQ(client_->eval(incr_by, {k}, {"5"}).integer(), 5);
        EXPECT_EQ(client_->eval(incr_by, {k}, {"1"}).integer(), 6);
        client_->del({k});
    }
}

TEST_F(RedisClusterTest, MultiKeyDelSpansMasters) {
    std::vector<std::string> keys;
    for (int i = 0; i < 10; ++i) {
        keys.push_back(untagged("d" + std::to_string(i)));
        client_->set(keys.back(), "x");
    }
    EXPECT_EQ(client_->del(keys), 10);
    EXPECT_EQ(client_->del(keys), 0);
}

// A slot migrating from A to B: a key not yet on A is answered with ASK; the client must send
// ASKING + the command to B, and must not take B as the slot's owner.
TEST_F(RedisClusterTest, AskDuringAMigrationReachesTheImportingNode) {
    const std::string k = key("ask");
    const int slot = redis_cluster_slot(k);
    const int source_port = port_of(client_->cluster_master_of(k));
    int target_port = 0;
    for (std::size_t n : cluster().masters()) {
        if (cluster().port(n) != source_port) target_port = cluster().port(n);
    }
    ASSERT_NE(target_port, 0);
    auto source = node_client(source_port);
    auto target = node_client(target_port);
    const std::string s = std::to_string(slot);
    target->command({"CLUSTER", "SETSLOT", s, "IMPORTING", node_id(source_port)});
    source->command({"CLUSTER", "SETSLOT", s, "MIGRATING", node_id(target_port)});

    client_->set(k, "moved-by-ask", 60s);  // source: ASK (key absent) -> target
    EXPECT_EQ(client_->get(k), "moved-by-ask");
    // The source does not have it: it sends anyone asking for it to the target.
    const RedisReply at_source = source->connection()->command({"EXISTS", k});
    EXPECT_TRUE(at_source.is_error() && at_source.error_message().rfind("ASK ", 0) == 0);
    EXPECT_EQ(port_of(client_->cluster_master_of(k)), source_port) << "ASK must not change the map";

    // Finish the migration; the client's next call gets MOVED and follows it.
    for (std::size_t n : cluster().masters()) {
        node_client(cluster().port(n))->command({"CLUSTER", "SETSLOT", s, "NODE", node_id(target_port)});
    }
    EXPECT_EQ(client_->get(k), "moved-by-ask");
    EXPECT_EQ(port_of(client_->cluster_master_of(k)), target_port);
    client_->del({k});
    // Give the slot back so later tests see the original layout.
    target->command({"CLUSTER", "SETSLOT", s, "MIGRATING", node_id(source_port)});
    source->command({"CLUSTER", "SETSLOT", s, "IMPORTING", node_id(target_port)});
    for (std::size_t n : cluster().masters()) {
        node_client(cluster().port(n))->command({"CLUSTER", "SETSLOT", s, "NODE", node_id(source_port)});
    }
}

// A coordinated failover the client is not told about: its map still names the old master,
// which now answers MOVED; the client refreshes and finds the data on the promoted replica.
TEST_F(RedisClusterTest, MovedAfterAFailoverRefreshesTheMapAndRetries) {
    const std::string k = key("moved");
    client_->set(k, "before", 60s);
    const int old_port = port_of(client_->cluster_master_of(k));
    std::string replica_of_old;
    for (std::size_t n = 0; n < cluster().size(); ++n) {
        const std::string info = node_client(cluster().port(n))->command({"INFO", "replication"}).str();
        if (info.find("role:slave") != std::string::npos && info.find("master_port:" + std::to_string(old_port) + "\r") != std::string::npos) {
            replica_of_old = std::to_string(cluster().port(n));
        }
    }
    ASSERT_FALSE(replica_of_old.empty());
    node_client(std::stoi(replica_of_old))->command({"CLUSTER", "FAILOVER"});
    ASSERT_TRUE(eventually([&] { return cluster().master_of_slot(redis_cluster_slot(k)) >= 0 &&
                                        cluster().port(static_cast<std::size_t>(cluster().master_of_slot(redis_cluster_slot(k)))) ==
                                            std::stoi(replica_of_old); },
                           10s));
    // The promoted replica knows first; the old master learns it from the next gossip. Until it
    // has, it still serves the slot itself (no MOVED to follow): wait until it calls itself a replica.
    ASSERT_TRUE(eventually([&] { return node_client(old_port)->command({"ROLE"}).elements().at(0).str() == "slave"; }, 10s));
    EXPECT_EQ(client_->get(k), "before");
    EXPECT_EQ(client_->cluster_master_of(k), "127.0.0.1:" + replica_of_old);
    client_->del({k});
}

// SIGKILL of a master: commands to its slots wait for the promotion (not an error), and the data
// acknowledged by its replica (WAIT) is there afterwards.
TEST_F(RedisClusterTest, KilledMasterIsReplacedAndCommandsResumeWithoutAnError) {
    const std::string k = key("failover");
    client_->set(k, "kept", 60s);
    EXPECT_EQ(client_->connection_for_key(k)->command({"WAIT", "1", "2000"}).integer(), 1);
    const int victim = cluster().master_of_slot(redis_cluster_slot(k));
    ASSERT_GE(victim, 0);
    cluster().kill(static_cast<std::size_t>(victim));
    Stopwatch watch;
    EXPECT_EQ(client_->get(k), "kept");  // waits out the failover (node-timeout 1 s + election)
    EXPECT_LT(watch.elapsed(), 15s);
    EXPECT_NE(port_of(client_->cluster_master_of(k)), cluster().port(static_cast<std::size_t>(victim)));
    cluster().start(static_cast<std::size_t>(victim));
    EXPECT_TRUE(cluster().wait_until_ok(20s));
    client_->del({k});
}

// The routed GET is lent like the standalone pool lends (no looks_alive() for a connection
// returned a moment ago) and runs once more on a checked lend when the node had closed it;
// writes stay checked on every lend, so a connection a failover closed is never written to.
// CLIENT KILL on the key's master closes the client's pooled connection between two calls
// (the window is an hour: every recent lend would be unchecked).
TEST_F(RedisClusterTest, ReadsSkipTheLendCheckAndRetryOnceWritesAreAlwaysChecked) {
    RedisOptions o = cluster().redis_options();
    o.pool_check_idle_after = std::chrono::hours(1);
    RedisClient client(o);
    const std::string k = key("lend");
    client.set(k, "v1");
    auto master = node_client(port_of(client.cluster_master_of(k)));

    const RedisPoolStats before_read = client.pool_stats();
    ASSERT_GE(master->command({"CLIENT", "KILL", "TYPE", "normal"}).integer(), 1);  // skips its own
    EXPECT_EQ(client.get(k), "v1");
    const RedisPoolStats after_read = client.pool_stats();
    EXPECT_EQ(after_read.lent_unchecked, before_read.lent_unchecked + 1);  // the lend that failed
    EXPECT_EQ(after_read.discarded, before_read.discarded + 1);
    EXPECT_EQ(client.get(k), "v1");  // the fresh connection is lent unchecked from now on
    EXPECT_EQ(client.pool_stats().lent_unchecked, after_read.lent_unchecked + 1);

    const RedisPoolStats before_write = client.pool_stats();
    ASSERT_GE(master->command({"CLIENT", "KILL", "TYPE", "normal"}).integer(), 1);
    EXPECT_NO_THROW(client.set(k, "v2"));  // checked: the closed connection is discarded, not written to
    const RedisPoolStats after_write = client.pool_stats();
    EXPECT_EQ(after_write.lent_unchecked, before_write.lent_unchecked);
    EXPECT_EQ(after_write.discarded, before_write.discarded + 1);
    EXPECT_EQ(client.get(k), "v2");
    client.del({k});
}

// A slot with neither its master nor its replica: a ClusterUnavailableError (RetryCall) after
// failover_wait, not a hang and not a ProtocolError. Then the cluster recovers.
TEST_F(RedisClusterTest, ASlotWithNoMasterLeftIsATypedRetryableErrorAfterTheWait) {
    RedisOptions o = cluster().redis_options();
    o.failover_wait = 1500ms;
    RedisClient client(o);
    const std::string k = key("down");
    client.set(k, "x");
    const int master = cluster().master_of_slot(redis_cluster_slot(k));
    ASSERT_GE(master, 0);
    std::vector<std::size_t> victims{static_cast<std::size_t>(master)};
    const std::string master_port = std::to_string(cluster().port(victims[0]));
    for (std::size_t n = 0; n < cluster().size(); ++n) {
        const std::string info = node_client(cluster().port(n))->command({"INFO", "replication"}).str();
        if (info.find("master_port:" + master_port + "\r") != std::string::npos) victims.push_back(n);
    }
    ASSERT_EQ(victims.size(), 2u);
    for (std::size_t v : victims) cluster().kill(v);
    Stopwatch watch;
    try {
        client.get(k);
        ADD_FAILURE() << "a slot without any node answered";
    } catch (const ClusterUnavailableError& e) {
        EXPECT_EQ(e.recovery(), Recovery::RetryCall);
    }
    EXPECT_GE(watch.elapsed(), 1500ms);
    EXPECT_LT(watch.elapsed(), 6s);
    for (std::size_t v : victims) cluster().start(v);
    ASSERT_TRUE(cluster().wait_until_ok(30s));
    EXPECT_NO_THROW(client.set(k, "back"));  // the restarted master is empty but serves again
    client.del({k});
}

}  // namespace
}  // namespace lockstep::test
