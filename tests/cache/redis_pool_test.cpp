// The bounded connection pool: waits are bounded and measured, connections are reused and
// bounded under contention.
#include "lockstep/cache/redis_connection_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

#include "lockstep/core/error.h"
#include "redis_fixture.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;
using RedisPoolTest = RedisTest;

TEST_F(RedisPoolTest, ExhaustedPoolWaitsItsTimeoutThenThrowsTimeoutError) {
    LOCKSTEP_REQUIRE_STANDALONE_REDIS("pool_size and pool_stats are per node on a cluster: this test exhausts or kills one node's pool");
    RedisClient client(options_with([](RedisOptions& o) {
        o.pool_size = 1;
        o.pool_wait_timeout = 300ms;
    }));
    auto held = client.connection();  // the only connection
    Stopwatch watch;
    EXPECT_THROW(client.get(key("k")), TimeoutError);
    const auto waited = watch.elapsed();
    EXPECT_GE(waited, 290ms);
    EXPECT_LT(waited, 300ms + 2s);
    EXPECT_EQ(client.pool_stats().wait_timeouts, 1u);
    EXPECT_EQ(client.pool_stats().open, 1u);
}

TEST_F(RedisPoolTest, WaitingCallerGetsTheConnectionWhenItIsReturned) {
    LOCKSTEP_REQUIRE_STANDALONE_REDIS("pool_size and pool_stats are per node on a cluster: this test exhausts or kills one node's pool");
    RedisClient client(options_with([](RedisOptions& o) {
        o.pool_size = 1;
        o.pool_wait_timeout = 10s;
    }));
    client.set(key("k"), "v");
    std::optional<PooledRedisConnection> held(client.connection());
    auto waiter = std::async(std::launch::async, [&] { return client.get(key("k")); });
    ASSERT_TRUE(eventually([&] { return client.pool_stats().waiting == 1; })) << "the caller never waited";
    held.reset();  // return it: the waiter must get it now
    ASSERT_EQ(waiter.wait_for(5s), std::future_status::ready);
    EXPECT_EQ(waiter.get(), "v");
    EXPECT_EQ(client.pool_stats().created, 1u);
}

TEST_F(RedisPoolTest, ZeroWaitTimeoutFailsAtOnceWhenExhausted) {
    LOCKSTEP_REQUIRE_STANDALONE_REDIS("pool_size and pool_stats are per node on a cluster: this test exhausts or kills one node's pool");
    RedisClient client(options_with([](RedisOptions& o) {
        o.pool_size = 1;
        o.pool_wait_timeout = 0ms;
    }));
    auto held = client.connection();
    Stopwatch watch;
    EXPECT_THROW(client.get(key("k")), TimeoutError);
    EXPECT_LT(watch.elapsed(), 1s);
}

TEST_F(RedisPoolTest, ConnectionsAreReusedAndBoundedUnderContention) {
    RedisClient client(options_with([](RedisOptions& o) {
        o.pool_size = 2;
        o.pool_wait_timeout = 10s;
    }));
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 6; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < 100; ++i) {
                try {
                    client.command({"INCR", key("n")});
                    if (client.pool_stats().open > 2) failures.fetch_add(1);
                } catch (const std::exception&) {
                    failures.fetch_add(1);
                }
            }
            (void)t;
        });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_EQ(client.get(key("n")), "600");
    const auto stats = client.pool_stats();
    EXPECT_LE(stats.created, 2u);
    EXPECT_EQ(stats.idle, stats.open);
    EXPECT_EQ(stats.discarded, 0u);
}

TEST_F(RedisPoolTest, BrokenConnectionIsDiscardedNotReturned) {
    LOCKSTEP_REQUIRE_STANDALONE_REDIS("pool_size and pool_stats are per node on a cluster: this test exhausts or kills one node's pool");
    RedisClient client(options_with([](RedisOptions& o) { o.pool_size = 1; }));
    {
        auto conn = client.connection();
        // Have the server close this very connection under us.
        const long long id = conn->command({"CLIENT", "ID"}).integer();
        client_->command({"CLIENT", "KILL", "ID", std::to_string(id)});
        EXPECT_THROW(conn->command({"PING"}), ConnectionError);
        EXPECT_TRUE(conn->broken());
    }
    EXPECT_EQ(client.pool_stats().discarded, 1u);
    EXPECT_EQ(client.command({"PING"}).str(), "PONG");
}

TEST_F(RedisPoolTest, IdleConnectionClosedByTheServerIsReplacedOnLend) {
    LOCKSTEP_REQUIRE_STANDALONE_REDIS("pool_size and pool_stats are per node on a cluster: this test exhausts or kills one node's pool");
    // Every lend checked (pool_check_idle_after 0): the closed connection is never lent.
    RedisClient client(options_with([](RedisOptions& o) {
        o.pool_size = 1;
        o.pool_check_idle_after = 0ms;
    }));
    long long id;
    {
        auto conn = client.connection();
        id = conn->command({"CLIENT", "ID"}).integer();
    }
    client_->command({"CLIENT", "KILL", "ID", std::to_string(id)});
    // The server has closed the socket, so EOF is already there to see; the next call must not
    // fail on the dead connection.
    EXPECT_EQ(client.command({"PING"}).str(), "PONG");
    EXPECT_EQ(client.pool_stats().discarded, 1u);
    EXPECT_EQ(client.pool_stats().created, 2u);
}

// The recently returned connection is lent without the recv(MSG_PEEK) check. The
// server kills it inside that window: a GET is answered all the same (run once more on a
// connection checked now), a write gets a typed ConnectionError, and neither ever reads a reply
// that is not its own.
TEST_F(RedisPoolTest, ConnectionKilledWithinTheUncheckedWindowGetsARetriedReadOrATypedError) {
    LOCKSTEP_REQUIRE_STANDALONE_REDIS("pool_size and pool_stats are per node on a cluster: this test exhausts or kills one node's pool");
    // A window no test run outlasts: the killed connection is certainly lent unchecked.
    RedisClient client(options_with([](RedisOptions& o) {
        o.pool_size = 1;
        o.pool_check_idle_after = std::chrono::hours(1);
    }));
    client.set(key("k"), "v");
    auto kill_pooled = [&] {
        long long id;
        {
            auto conn = client.connection();
            id = conn->command({"CLIENT", "ID"}).integer();
        }
        EXPECT_EQ(client_->command({"CLIENT", "KILL", "ID", std::to_string(id)}).integer(), 1);
    };

    kill_pooled();
    const auto before = client.pool_stats();
    EXPECT_EQ(client.get(key("k")), "v") << "the read is run once more on a checked connection";
    auto after = client.pool_stats();
    EXPECT_EQ(after.discarded, before.discarded + 1);
    EXPECT_EQ(after.lent_unchecked, before.lent_unchecked + 1);
    EXPECT_EQ(after.created, before.created + 1);

    kill_pooled();
    try {
        client.command({"INCR", key("n")});
        FAIL() << "a write on the killed connection did not fail";
    } catch (const ConnectionError& e) {
        EXPECT_EQ(dynamic_cast<const TimeoutError*>(&e), nullptr) << e.what();
        EXPECT_NE(std::string(e.what()).find("may have been applied"), std::string::npos) << e.what();
    }
    EXPECT_EQ(client.get(key("n")), std::nullopt) << "the write was not repeated behind the caller's back";
    EXPECT_EQ(client.command({"PING"}).str(), "PONG");
}

// Idle past the window, the same kill is caught before lending: even a write succeeds.
TEST_F(RedisPoolTest, ConnectionIdlePastTheWindowIsCheckedAndReplacedBeforeAWrite) {
    LOCKSTEP_REQUIRE_STANDALONE_REDIS("pool_size and pool_stats are per node on a cluster: this test exhausts or kills one node's pool");
    constexpr auto kWindow = 50ms;
    RedisClient client(options_with([&](RedisOptions& o) {
        o.pool_size = 1;
        o.pool_check_idle_after = kWindow;
    }));
    long long id;
    {
        auto conn = client.connection();
        id = conn->command({"CLIENT", "ID"}).integer();
    }
    const auto returned = std::chrono::steady_clock::now();  // at or after the pool's own mark
    EXPECT_EQ(client_->command({"CLIENT", "KILL", "ID", std::to_string(id)}).integer(), 1);
    std::this_thread::sleep_until(returned + kWindow + 1ms);  // a time condition: past the window
    const auto before = client.pool_stats();
    EXPECT_EQ(client.command({"INCR", key("n")}).integer(), 1);
    const auto after = client.pool_stats();
    EXPECT_EQ(after.discarded, before.discarded + 1);
    EXPECT_EQ(after.lent_unchecked, before.lent_unchecked);
}

// A connection with reply bytes nobody read is never lent, checked or not.
TEST_F(RedisPoolTest, ConnectionWithAnUnreadReplyIsNotLentEvenWithinTheWindow) {
    RedisClient client(options_with([](RedisOptions& o) {
        o.pool_size = 1;
        o.pool_check_idle_after = std::chrono::hours(1);
    }));
    {
        auto conn = client.connection();
        conn->send({"SET", key("k"), "mine"});  // its +OK is never read
    }
    EXPECT_EQ(client.pool_stats().discarded, 1u);
    EXPECT_EQ(client.get(key("k")), "mine") << "the next caller reads its own reply, not +OK";
}

TEST(RedisPoolOptionsTest, NegativeCheckWindowIsAConfigError) {
    RedisOptions o;
    o.pool_check_idle_after = std::chrono::milliseconds(-1);
    EXPECT_THROW(RedisConnectionPool{o}, ConfigError);
}

}  // namespace
}  // namespace lockstep::test
