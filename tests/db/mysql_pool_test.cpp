// MysqlPool against the real MariaDB: bounded lending with a wait timeout, connection failures
// as typed errors, and recovery after the server is restarted under the pool.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "db_test_support.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class MysqlPoolTest : public DbTest {};

// A loopback port with nothing listening: bind an ephemeral port, then close it.
int free_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    ::close(fd);
    return ntohs(addr.sin_port);
}

TEST_F(MysqlPoolTest, WaitsThenTimesOutWhenExhausted) {
    MysqlOptions o = db_options();
    o.pool_size = 2;
    o.pool_wait_timeout = 300ms;
    MysqlPool pool(o);
    PooledMysqlConnection a = pool.acquire();
    PooledMysqlConnection b = pool.acquire();

    const auto start = Clock::now();
    EXPECT_THROW(pool.acquire(), TimeoutError);
    const auto waited = Clock::now() - start;
    EXPECT_GE(waited, 300ms);
    EXPECT_LT(waited, 3s);
    EXPECT_EQ(pool.stats().wait_timeouts, 1u);
    EXPECT_EQ(pool.stats().open, 2u);
    try {
        pool.acquire();
        FAIL() << "lent a third connection from a pool of two";
    } catch (const TimeoutError& e) {
        EXPECT_EQ(e.recovery(), Recovery::RetryCall);
    }
}

TEST_F(MysqlPoolTest, HandsAReturnedConnectionToAWaiter) {
    MysqlOptions o = db_options();
    o.pool_size = 1;
    o.pool_wait_timeout = 5s;
    MysqlPool pool(o);
    auto held = std::make_unique<PooledMysqlConnection>(pool.acquire());
    auto waiter =
        std::async(std::launch::async, [&] { return pool.query_one("SELECT 7 AS x")->get<int>("x"); });
    EXPECT_EQ(waiter.wait_for(200ms), std::future_status::timeout);  // it is waiting for `held`
    held.reset();
    EXPECT_EQ(waiter.get(), 7);
    EXPECT_EQ(pool.stats().created, 1u);
}

TEST_F(MysqlPoolTest, ReusesConnectionsInsteadOfOpeningNewOnes) {
    MysqlPool pool(db_options());
    for (int i = 0; i < 20; ++i) pool.query_one("SELECT ? AS x", {i});
    const MysqlPoolStats s = pool.stats();
    EXPECT_EQ(s.created, 1u);
    EXPECT_EQ(s.open, 1u);
    EXPECT_EQ(s.idle, 1u);
}

TEST_F(MysqlPoolTest, ManyThreadsShareABoundedPool) {
    MysqlOptions o = db_options();
    o.pool_size = 3;
    MysqlPool pool(o);
    const std::int64_t id = make_product(0);
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
        threads.emplace_back([&] {
            for (int i = 0; i < 25; ++i)
                pool.execute("UPDATE products SET stock = stock + 1 WHERE id = ?", {id});
        });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(stock_of(id), 200);
    EXPECT_LE(pool.stats().created, 3u);
}

TEST_F(MysqlPoolTest, BadCredentialsAreATypedError) {
    MysqlOptions o = db_options();
    o.user = "nobody_" + std::to_string(::getpid());
    o.password = "wrong";
    MysqlPool pool(o);
    try {
        pool.acquire();
        FAIL() << "connected with bad credentials";
    } catch (const DbError& e) {
        EXPECT_EQ(e.code(), 1045);  // ER_ACCESS_DENIED_ERROR
        EXPECT_EQ(e.sql_state(), "28000");
        EXPECT_EQ(e.recovery(), Recovery::GiveUp);
    }
    EXPECT_EQ(pool.stats().open, 0u);  // the reserved slot was given back
}

TEST_F(MysqlPoolTest, UnknownDatabaseIsATypedError) {
    MysqlOptions o = db_options();
    o.database = "no_such_db_" + std::to_string(::getpid());
    try {
        MysqlConnection conn(o);
        FAIL() << "connected to a missing database";
    } catch (const DbError& e) {
        EXPECT_EQ(e.code(), 1049);  // ER_BAD_DB_ERROR
        EXPECT_EQ(e.recovery(), Recovery::GiveUp);
    }
}

TEST_F(MysqlPoolTest, RefusedPortFailsWithinTheConnectTimeout) {
    MysqlOptions o = db_options();
    o.port = free_port();
    o.connect_timeout = 2s;
    o.pool_size = 1;
    MysqlPool pool(o);
    for (int attempt = 0; attempt < 2; ++attempt) {  // the second proves the failed slot was freed
        const auto start = Clock::now();
        try {
            pool.acquire();
            FAIL() << "connected to a closed port";
        } catch (const DbError& e) {
            EXPECT_TRUE(e.code() == 2002 || e.code() == 2003) << e.what();
            EXPECT_EQ(e.recovery(), Recovery::RetryCall);
        }
        EXPECT_LT(Clock::now() - start, o.connect_timeout);
    }
}

TEST_F(MysqlPoolTest, AStatementOnAConnectionThatDiedIsATypedErrorThenThePoolRecovers) {
    LOCKSTEP_REQUIRE_OWNED_MYSQL();
    MysqlOptions o = db_options();
    o.pool_size = 1;
    o.validation_interval = std::chrono::hours(1);  // trust the idle connection: no ping
    MysqlPool pool(o);
    EXPECT_EQ(pool.query_one("SELECT 1 AS x")->get<int>("x"), 1);

    servers().restart_mysql();

    try {
        pool.query_one("SELECT 2 AS x");
        FAIL() << "a statement on a dead connection reported success";
    } catch (const DbError& e) {
        EXPECT_EQ(e.recovery(), Recovery::RetryCall) << e.what();
        EXPECT_TRUE(e.code() == 2006 || e.code() == 2013) << e.what();  // gone / lost
    }
    EXPECT_EQ(pool.stats().discarded, 1u);  // closed on return, not lent again
    EXPECT_EQ(pool.query_one("SELECT 3 AS x")->get<int>("x"), 3);
    EXPECT_EQ(pool.stats().created, 2u);
}

TEST_F(MysqlPoolTest, ReplacesAnIdleConnectionThatFailsItsPing) {
    LOCKSTEP_REQUIRE_OWNED_MYSQL();
    MysqlOptions o = db_options();
    o.pool_size = 1;
    o.validation_interval = 0ms;  // ping on every lend
    MysqlPool pool(o);
    EXPECT_EQ(pool.query_one("SELECT 1 AS x")->get<int>("x"), 1);

    servers().restart_mysql();

    EXPECT_EQ(pool.query_one("SELECT 2 AS x")->get<int>("x"), 2);  // no error reaches the caller
    const MysqlPoolStats s = pool.stats();
    EXPECT_EQ(s.validation_failures, 1u);
    EXPECT_EQ(s.discarded, 1u);
    EXPECT_EQ(s.created, 2u);
}

TEST_F(MysqlPoolTest, ABrokenConnectionRefusesFurtherStatementsWithoutSendingThem) {
    LOCKSTEP_REQUIRE_OWNED_MYSQL();
    MysqlOptions o = db_options();
    o.validation_interval = std::chrono::hours(1);
    MysqlPool pool(o);
    PooledMysqlConnection conn = pool.acquire();
    conn->query_one("SELECT 1 AS x");
    servers().restart_mysql();
    EXPECT_THROW(conn->query_one("SELECT 1 AS x"), DbError);
    EXPECT_TRUE(conn->broken());
    EXPECT_THROW(conn->query_one("SELECT 1 AS x"), ConnectionError);
    EXPECT_FALSE(conn->ping());
}

TEST_F(MysqlPoolTest, AQueryLongerThanTheReadTimeoutFailsInsteadOfHanging) {
    MysqlOptions o = db_options();
    o.read_timeout = 1s;
    MysqlPool pool(o);
    const auto start = Clock::now();
    try {
        pool.query("SELECT SLEEP(5) AS s");
        FAIL() << "a 5 s query finished within a 1 s read timeout";
    } catch (const DbError& e) {
        EXPECT_EQ(e.code(), 2013) << e.what();  // CR_SERVER_LOST
        EXPECT_EQ(e.recovery(), Recovery::RetryCall);
    }
    EXPECT_LT(Clock::now() - start, 4s);
    EXPECT_EQ(pool.stats().discarded, 1u);  // the timed-out session is not reused
}

TEST_F(MysqlPoolTest, DiscardedConnectionIsClosedNotReused) {
    MysqlPool pool(db_options());
    {
        PooledMysqlConnection conn = pool.acquire();
        conn->execute_unprepared("SET SESSION innodb_lock_wait_timeout = 1");
        conn->discard();
    }
    EXPECT_EQ(pool.stats().discarded, 1u);
    EXPECT_EQ(pool.query_one("SELECT @@SESSION.innodb_lock_wait_timeout AS t")->get<std::int64_t>("t"),
              pool.query_one("SELECT @@GLOBAL.innodb_lock_wait_timeout AS t")->get<std::int64_t>("t"));
}

TEST_F(MysqlPoolTest, AGuardMayOutliveItsPool) {
    auto pool = std::make_unique<MysqlPool>(db_options());
    PooledMysqlConnection conn = pool->acquire();
    pool.reset();
    EXPECT_EQ(conn->query_one("SELECT 3 AS x")->get<int>("x"), 3);
}  // the guard closes its connection here

TEST_F(MysqlPoolTest, ZeroPoolSizeIsAConfigError) {
    MysqlOptions o = db_options();
    o.pool_size = 0;
    EXPECT_THROW(MysqlPool pool(o), ConfigError);
}

}  // namespace
}  // namespace lockstep::test
