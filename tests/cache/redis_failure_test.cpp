// Unreachable and unfriendly endpoints: every failure is typed and bounded by the configured
// timeouts (measured), never a hang.
#include <gtest/gtest.h>

#include <string>

#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"
#include "lockstep/core/fault_point.h"
#include "redis_fixture.h"

namespace lockstep::test {
namespace {

RedisOptions loopback(int port) {
    RedisOptions o;
    o.host = "127.0.0.1";
    o.port = port;
    o.connect_timeout = 300ms;
    o.socket_timeout = 300ms;
    o.pool_wait_timeout = 300ms;
    return o;
}

bool is_timeout(const std::exception& e) {
    return dynamic_cast<const TimeoutError*>(&e) != nullptr;
}

TEST(RedisFailureTest, RefusedPortIsAConnectionErrorAtOnce) {
    RedisClient client(loopback(refused_port()));
    Stopwatch watch;
    try {
        client.get("k");
        FAIL() << "no exception";
    } catch (const ConnectionError& e) {
        EXPECT_FALSE(is_timeout(e)) << e.what();
        EXPECT_NE(std::string(e.what()).find("refused"), std::string::npos) << e.what();
        EXPECT_EQ(e.recovery(), Recovery::RetryCall);
    }
    EXPECT_LT(watch.elapsed(), 300ms);
    EXPECT_EQ(client.pool_stats().open, 0u);  // the failed slot was given back
}

TEST(RedisFailureTest, ServerThatNeverAnswersFailsAfterTheSocketTimeout) {
    SilentListener silent;  // accepts TCP (in the kernel), never replies
    RedisClient client(loopback(silent.port()));
    Stopwatch watch;
    try {
        client.get("k");
        FAIL() << "no exception";
    } catch (const TimeoutError& e) {
        EXPECT_NE(std::string(e.what()).find("may have been applied"), std::string::npos) << e.what();
    }
    const auto waited = watch.elapsed();
    EXPECT_GE(waited, 280ms);
    EXPECT_LT(waited, 300ms + 2s);
    EXPECT_EQ(client.pool_stats().discarded, 1u);
}

TEST(RedisFailureTest, ServerThatNeverAcceptsFailsAfterTheConnectTimeout) {
    SilentListener silent(0);
    silent.fill_backlog();  // further SYNs are dropped: connect() cannot complete
    RedisClient client(loopback(silent.port()));
    Stopwatch watch;
    EXPECT_THROW(client.get("k"), TimeoutError);
    const auto waited = watch.elapsed();
    EXPECT_GE(waited, 280ms);
    EXPECT_LT(waited, 300ms + 2s);
}

TEST(RedisFailureTest, AuthTimeoutDuringConnectIsBoundedToo) {
    SilentListener silent;
    RedisOptions o = loopback(silent.port());
    o.password = "secret";  // AUTH is the first command, sent while connecting
    Stopwatch watch;
    EXPECT_THROW(RedisConnection{o}, TimeoutError);
    EXPECT_LT(watch.elapsed(), 300ms + 2s);
}

using RedisAuthTest = RedisTest;

TEST_F(RedisAuthTest, PasswordWithoutAUserIsRejectedAsAProtocolError) {
    // The default user of the private server has no password: AUTH <password> is an error.
    if (!servers().owns_redis()) GTEST_SKIP() << "external Redis may have a password";
    RedisClient client(options_with([](RedisOptions& o) { o.password = "not-the-password"; }));
    try {
        client.command({"PING"});
        FAIL() << "no exception";
    } catch (const ProtocolError& e) {
        EXPECT_NE(std::string(e.what()).find("AUTH"), std::string::npos) << e.what();
        EXPECT_EQ(std::string(e.what()).find("not-the-password"), std::string::npos) << "password leaked";
    }
}

TEST_F(RedisAuthTest, AclUserAuthenticatesAndWrongPasswordIsAProtocolError) {
    LOCKSTEP_REQUIRE_STANDALONE_REDIS("ACL SETUSER creates the user on one node only");
    const std::string user = "lockstep-test-" + std::to_string(::getpid());
    client_->command({"ACL", "SETUSER", user, "reset", "on", ">right-password", "~*", "&*", "+@all"});
    struct DeleteUser {
        RedisClient& client;
        std::string user;
        ~DeleteUser() {
            try {
                client.command({"ACL", "DELUSER", user});
            } catch (...) {
            }
        }
    } cleanup{*client_, user};

    RedisClient good(options_with([&](RedisOptions& o) {
        o.user = user;
        o.password = "right-password";
    }));
    EXPECT_EQ(good.command({"ACL", "WHOAMI"}).str(), user);

    RedisClient bad(options_with([&](RedisOptions& o) {
        o.user = user;
        o.password = "wrong-password";
    }));
    try {
        bad.command({"PING"});
        FAIL() << "no exception";
    } catch (const ProtocolError& e) {
        EXPECT_NE(std::string(e.what()).find("WRONGPASS"), std::string::npos) << e.what();
        EXPECT_EQ(e.recovery(), Recovery::GiveUp);
    }
}

TEST_F(RedisAuthTest, SelectedDatabaseIsUsedOnEveryConnection) {
    LOCKSTEP_REQUIRE_STANDALONE_REDIS("a cluster has database 0 only");
    const int other_db = options_.db == 1 ? 2 : 1;
    RedisClient db1(options_with([&](RedisOptions& o) { o.db = other_db; }));
    db1.set(key("k"), "in-the-other-db", 60s);
    EXPECT_EQ(client_->get(key("k")), std::nullopt);
    EXPECT_EQ(db1.get(key("k")), "in-the-other-db");
    db1.del({key("k")});

    RedisClient out_of_range(options_with([](RedisOptions& o) { o.db = 100000; }));
    EXPECT_THROW(out_of_range.command({"PING"}), ProtocolError);
}

// An error raised at the fault point between queueing and sending leaves a command in
// hiredis's output buffer. The connection must be thrown away, or the next caller would send
// that command along with its own and read the wrong reply.
TEST_F(RedisTest, ErrorBetweenQueueingAndSendingDiscardsTheConnection) {
    RedisOptions o = options_;
    o.pool_size = 1;
    RedisClient client(o);
    client.set(key("k"), "value");
    {
        auto armed = fault::arm("redis.before_send", fault::fail<ConnectionError>("injected"), {.times = 1});
        EXPECT_THROW(client.command({"SET", key("k"), "overwritten"}), ConnectionError);
    }
    EXPECT_EQ(client.get(key("k")), "value");  // the queued SET was never sent
    EXPECT_EQ(client.pool_stats().discarded, 1u);
}

}  // namespace
}  // namespace lockstep::test
