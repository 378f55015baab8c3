// RedisClient against the private redis-server: typed replies, binary safety, pipelines and
// scripts.
#include "lockstep/cache/redis_client.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lockstep/core/error.h"
#include "redis_fixture.h"

namespace lockstep::test {
namespace {

using RedisClientTest = RedisTest;

const std::string kNulValue("a\0b\0\0c", 6);

TEST_F(RedisClientTest, MissingKeyIsNullopt) {
    EXPECT_EQ(client_->get(key("absent")), std::nullopt);
}

TEST_F(RedisClientTest, SetWithTtlStoresValueAndExpiry) {
    client_->set(key("k"), "v", 60s);
    EXPECT_EQ(client_->get(key("k")), "v");
    const long long pttl = client_->command({"PTTL", key("k")}).integer();
    EXPECT_GT(pttl, 0);
    EXPECT_LE(pttl, 60000);
    client_->set(key("k2"), "v");
    EXPECT_EQ(client_->command({"PTTL", key("k2")}).integer(), -1);  // no expiry without a ttl
    EXPECT_THROW(client_->set(key("k3"), "v", 0ms), ConfigError);
}

TEST_F(RedisClientTest, DelCountsKeysThatExisted) {
    client_->set(key("a"), "1");
    client_->set(key("b"), "2");
    EXPECT_EQ(client_->del({key("a"), key("b"), key("c")}), 2);
    EXPECT_EQ(client_->del({}), 0);
}

TEST_F(RedisClientTest, ValuesWithNulBytesRoundTripThroughGetAndSet) {
    const std::string k = key(std::string("nul\0key", 7));
    client_->set(k, kNulValue);
    EXPECT_EQ(client_->get(k), kNulValue);
    EXPECT_EQ(client_->command({"STRLEN", k}).integer(), 6);
    EXPECT_EQ(client_->get(key("nul")), std::nullopt);  // the key is not cut at its NUL either
}

TEST_F(RedisClientTest, ValuesWithNulBytesRoundTripThroughEval) {
    static const RedisScript echo("return {KEYS[1], ARGV[1]}");
    const std::string k = key(std::string("e\0k", 3));
    RedisReply r = client_->eval(echo, {k}, {kNulValue});
    ASSERT_EQ(r.elements().size(), 2u);
    EXPECT_EQ(r.elements()[0].str(), k);
    EXPECT_EQ(r.elements()[1].str(), kNulValue);
}

TEST_F(RedisClientTest, ValuesWithNulBytesRoundTripThroughAPipeline) {
    auto replies = client_->pipeline({{"SET", key("p"), kNulValue}, {"GET", key("p")}});
    ASSERT_EQ(replies.size(), 2u);
    EXPECT_EQ(replies[0].str(), "OK");
    EXPECT_EQ(replies[1].str(), kNulValue);
}

TEST_F(RedisClientTest, ErrorReplyFromCommandIsAProtocolErrorWithTheServerMessage) {
    client_->command({"RPUSH", key("list"), "x"});
    try {
        client_->get(key("list"));
        FAIL() << "no exception";
    } catch (const ProtocolError& e) {
        EXPECT_NE(std::string(e.what()).find("WRONGTYPE"), std::string::npos) << e.what();
    }
    EXPECT_THROW(client_->command({"NO-SUCH-COMMAND"}), ProtocolError);
}

TEST_F(RedisClientTest, ReplyTypeMismatchIsAProtocolError) {
    RedisReply ok = client_->command({"SET", key("k"), "v"});
    EXPECT_THROW((void)ok.integer(), ProtocolError);
    RedisReply n = client_->command({"INCR", key("n")});
    EXPECT_THROW((void)n.str(), ProtocolError);
    EXPECT_THROW((void)n.optional_string(), ProtocolError);
    EXPECT_EQ(n.integer(), 1);
}

TEST_F(RedisClientTest, EmptyCommandIsAConfigError) {
    EXPECT_THROW(client_->command(std::vector<std::string>{}), ConfigError);
    EXPECT_THROW(client_->pipeline({{"PING"}, {}}), ConfigError);
}

TEST_F(RedisClientTest, PipelineOfAThousandCommandsAnswersEveryOneInOrder) {
    std::vector<std::vector<std::string>> commands;
    for (int i = 0; i < 1000; ++i) commands.push_back({"RPUSH", key("list"), std::to_string(i)});

    // The server counts its socket reads: 1,000 separate round trips would need at least 1,000;
    // one pipelined write arrives in a handful of reads. (Only on our private server, where no
    // one else is talking to it.)
    const bool private_server = servers().owns_redis();
    auto conn = client_->connection();
    const auto reads = [&] {
        const std::string info = conn->command({"INFO", "stats"}).str();
        const std::string field = "total_reads_processed:";
        return std::stoll(info.substr(info.find(field) + field.size()));
    };
    const long long before = private_server ? reads() : 0;
    auto replies = conn->pipeline(commands);
    const long long after = private_server ? reads() : 0;

    ASSERT_EQ(replies.size(), 1000u);
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(replies[i].integer(), i + 1) << "reply " << i;
    auto list = conn->command({"LRANGE", key("list"), "0", "-1"});
    ASSERT_EQ(list.elements().size(), 1000u);
    EXPECT_EQ(list.elements()[999].str(), "999");
    if (private_server) {
        EXPECT_LT(after - before, 100) << "the pipeline was not sent in one go";
    }
}

TEST_F(RedisClientTest, PipelineReturnsErrorRepliesInPlace) {
    client_->command({"RPUSH", key("list"), "x"});
    auto replies = client_->pipeline({{"INCR", key("n")}, {"GET", key("list")}, {"INCR", key("n")}});
    ASSERT_EQ(replies.size(), 3u);
    EXPECT_EQ(replies[0].integer(), 1);
    EXPECT_TRUE(replies[1].is_error());
    EXPECT_THROW(replies[1].throw_if_error(), ProtocolError);
    EXPECT_EQ(replies[2].integer(), 2);
}

TEST_F(RedisClientTest, LocalScriptDigestEqualsTheServers) {
    // Sources of every length around the SHA-1 block and padding boundaries.
    for (std::size_t n = 0; n < 140; ++n) {
        RedisScript script("return '" + std::string(n, 'x') + "'");
        EXPECT_EQ(client_->command({"SCRIPT", "LOAD", script.source()}).str(), script.sha1()) << n;
    }
}

TEST_F(RedisClientTest, ScriptIsReloadedAfterScriptFlush) {
    RedisScript script("return redis.call('INCR', KEYS[1]) -- " + prefix_);  // unique to this test
    EXPECT_EQ(client_->eval(script, {key("n")}, {}).integer(), 1);  // first call: NOSCRIPT, load, retry
    client_->command({"SCRIPT", "FLUSH"});
    EXPECT_EQ(client_->command({"SCRIPT", "EXISTS", script.sha1()}).elements()[0].integer(), 0);
    EXPECT_EQ(client_->eval(script, {key("n")}, {}).integer(), 2);  // ran exactly once more
    EXPECT_EQ(client_->command({"SCRIPT", "EXISTS", script.sha1()}).elements()[0].integer(), 1);
}

TEST_F(RedisClientTest, ScriptErrorIsAProtocolError) {
    static const RedisScript fails("return redis.error_reply('lockstep-test boom')");
    try {
        client_->eval(fails, {}, {});
        FAIL() << "no exception";
    } catch (const ProtocolError& e) {
        EXPECT_NE(std::string(e.what()).find("lockstep-test boom"), std::string::npos) << e.what();
    }
}

TEST_F(RedisClientTest, ScriptRepliesAreTyped) {
    static const RedisScript mixed("return {1, 'two', false, {3}}");
    RedisReply r = client_->eval(mixed, {}, {});
    ASSERT_EQ(r.elements().size(), 4u);
    EXPECT_EQ(r.elements()[0].integer(), 1);
    EXPECT_EQ(r.elements()[1].str(), "two");
    EXPECT_TRUE(r.elements()[2].is_nil());  // Lua false is a nil bulk reply
    EXPECT_EQ(r.elements()[3].elements()[0].integer(), 3);
}

TEST_F(RedisClientTest, BorrowedConnectionKeepsStateAcrossCommands) {
    auto conn = client_->connection_for_key(key("n"));  // the key's master on a cluster
    EXPECT_EQ(conn->command({"MULTI"}).str(), "OK");
    EXPECT_EQ(conn->command({"INCR", key("n")}).str(), "QUEUED");
    auto exec = conn->command({"EXEC"});
    EXPECT_EQ(exec.elements()[0].integer(), 1);
}

TEST(RedisClientOptionsTest, MeaninglessOptionsAreConfigErrors) {
    RedisOptions o;
    o.pool_size = 0;
    EXPECT_THROW(RedisClient{o}, ConfigError);
    o = {};
    o.socket_timeout = 0ms;
    EXPECT_THROW(RedisClient{o}, ConfigError);
    o = {};
    o.port = 70000;
    EXPECT_THROW(RedisClient{o}, ConfigError);
    // Options built by hand, not parsed: a cluster with database 1 is refused at once (it
    // waited failover_wait, then "no master serves slot ...", found by the suites on a cluster).
    o = {};
    o.topology = RedisTopology::Cluster;
    o.nodes = {{"127.0.0.1", 1}};
    o.port = 1;
    o.db = 1;
    try {
        RedisClient client{o};
        ADD_FAILURE() << "no ConfigError";
    } catch (const ConfigError& e) {
        EXPECT_EQ(e.part(), "database") << e.what();
    }
}

}  // namespace
}  // namespace lockstep::test
