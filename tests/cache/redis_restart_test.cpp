// redis-server killed and restarted under a live client: the next call works, a command in
// flight is reported (never silently re-sent), scripts are reloaded, the subscriber comes back.
#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <mutex>
#include <string>

#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"
#include "lockstep/core/fault_point.h"
#include "redis_fixture.h"

namespace lockstep::test {
namespace {

// Every test restarts the server, so each starts with LOCKSTEP_REQUIRE_OWNED_REDIS().
using RedisRestartTest = RedisTest;

TEST_F(RedisRestartTest, NextCallAfterARestartSucceeds) {
    LOCKSTEP_REQUIRE_OWNED_REDIS();
    // Every lend checked: a restart faster than the default 100 ms window is still seen.
    RedisClient client(options_with([](RedisOptions& o) {
        o.pool_size = 3;
        o.pool_check_idle_after = 0ms;
    }));
    {
        // Fill the pool with three idle connections that the restart will kill.
        auto c1 = client.connection();
        auto c2 = client.connection();
        auto c3 = client.connection();
    }
    ASSERT_EQ(client.pool_stats().idle, 3u);
    servers().restart_redis();

    client.set(key("k"), "after-restart", 60s);  // must not fail on a dead pooled connection
    EXPECT_EQ(client.get(key("k")), "after-restart");
    EXPECT_GE(client.pool_stats().discarded, 1u);
}

TEST_F(RedisRestartTest, ConnectionKilledBetweenLendAndSendIsAConnectionErrorNotARetry) {
    LOCKSTEP_REQUIRE_OWNED_REDIS();
    RedisClient client(options_);
    client.command({"PING"});  // a pooled connection exists and passes the liveness check below

    // Stop the INCR after the pool lent a live connection and before it is sent; restart the
    // server there, so the command goes out on a connection the server has already closed.
    fault::Gate gate;
    auto armed = fault::arm("redis.before_send", gate.action(), {.skip = 0, .times = 1, .only_thread = {}});
    auto call = std::async(std::launch::async, [&] { client.command({"INCR", key("n")}); });
    ASSERT_TRUE(gate.wait_arrivals(1, 5s));
    servers().restart_redis();
    gate.open();

    try {
        call.get();
        FAIL() << "no exception";
    } catch (const ConnectionError& e) {
        EXPECT_EQ(dynamic_cast<const TimeoutError*>(&e), nullptr)
            << "a closed socket is not a timeout: " << e.what();
        EXPECT_NE(std::string(e.what()).find("may have been applied"), std::string::npos) << e.what();
    }
    // Reported, not re-sent: a silent retry on a fresh connection would have created the key.
    EXPECT_EQ(client.get(key("n")), std::nullopt);
    EXPECT_EQ(client.command({"PING"}).str(), "PONG");
}

TEST_F(RedisRestartTest, BlockingCommandInterruptedByTheKillIsAConnectionError) {
    LOCKSTEP_REQUIRE_OWNED_REDIS();
    RedisClient client(options_with([](RedisOptions& o) { o.socket_timeout = 20s; }));
    auto call = std::async(std::launch::async, [&] { client.command({"BLPOP", key("list"), "15"}); });
    // Wait until the server itself reports the BLPOP as blocked: it is then truly in flight.
    ASSERT_TRUE(eventually([&] { return info_field(*client_, "clients", "blocked_clients") >= 1; }));
    Stopwatch watch;
    servers().restart_redis();
    EXPECT_THROW(call.get(), ConnectionError);
    EXPECT_LT(watch.elapsed(), 10s);  // the kill ended it, not the 15 s BLPOP or the socket timeout
}

TEST_F(RedisRestartTest, ScriptIsReloadedAfterARestart) {
    LOCKSTEP_REQUIRE_OWNED_REDIS();
    RedisScript script("return ARGV[1] .. '-' .. '" + prefix_ + "'");
    EXPECT_EQ(client_->eval(script, {}, {"before"}).str(), "before-" + prefix_);
    servers().restart_redis();
    EXPECT_EQ(client_->eval(script, {}, {"after"}).str(), "after-" + prefix_);
}

TEST_F(RedisRestartTest, SubscriptionSurvivesARestartAndListenersAreTold) {
    LOCKSTEP_REQUIRE_OWNED_REDIS();
    RedisClient client(options_);
    Inbox inbox;
    const std::string ch = key("ch");
    auto sub = client.subscriber().subscribe(ch, inbox.callback());

    std::mutex mutex;
    std::condition_variable cv;
    int reconnects = 0;
    const auto listener = client.subscriber().add_reconnect_listener([&] {
        {
            std::lock_guard<std::mutex> lock(mutex);
            ++reconnects;
        }
        cv.notify_all();
    });

    servers().restart_redis();
    {
        // The listener runs after the resubscribe was confirmed, so publishing now must reach us.
        std::unique_lock<std::mutex> lock(mutex);
        ASSERT_TRUE(cv.wait_for(lock, 15s, [&] { return reconnects >= 1; })) << "no reconnect notice";
    }
    EXPECT_TRUE(client.subscriber().connected());
    EXPECT_EQ(client.publish(ch, "after-restart"), 1);
    ASSERT_TRUE(inbox.wait_for(1));
    EXPECT_EQ(inbox.payloads(), std::vector<std::string>{"after-restart"});
    client.subscriber().remove_reconnect_listener(listener);
}

}  // namespace
}  // namespace lockstep::test
