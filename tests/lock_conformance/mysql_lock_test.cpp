// What only the MySQL backend has to get right: long names, waits longer than the read timeout,
// fencing tokens across a server restart (and the epoch guard that refuses tokens that went
// back), and an account with no CREATE ROUTINE / SUPER.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <thread>

#include "lockstep/core/names.h"
#include "lockstep/db/mysql_connection.h"

#include "lockstep/core/error.h"
#include "lockstep/locks/mysql_lock_service.h"
#include "lockstep/servers/local_servers.h"
#include "test_servers.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

TEST(MysqlLock, LongNamesAreShortenedAndStillExclusive) {
    LockServiceOptions o;
    o.prefix = "ml:";
    MysqlLockService a(servers().mysql_options(), o), b(servers().mysql_options(), o);
    const std::string long_name(kMaxNameLength, 'x');  // the longest name of the rule (core/names.h)
    EXPECT_LE(a.lock_name(long_name).size(), 64u);
    EXPECT_NE(a.lock_name(long_name), a.lock_name(long_name.substr(1) + "y"));
    auto m = a.make_mutex(long_name);
    std::unique_lock hold(*m);
    bool got = true;
    std::thread([&] { got = b.make_mutex(long_name)->try_lock(); }).join();
    EXPECT_FALSE(got);
}

TEST(MysqlLock, WaitsLongerThanTheReadTimeoutAreChunked) {
    // A single GET_LOCK wait of 3 s would end in error 2013 with a 1.5 s read timeout.
    auto options = servers().mysql_options();
    options.read_timeout = 1500ms;
    LockServiceOptions o;
    o.prefix = "mc:";
    MysqlLockService a(options, o), b(options, o);
    auto m = a.make_mutex("chunked");
    std::unique_lock hold(*m);
    std::thread([&] {
        const auto t0 = std::chrono::steady_clock::now();
        EXPECT_FALSE(b.make_mutex("chunked")->try_lock_for(3s));
        EXPECT_GE(std::chrono::steady_clock::now() - t0, 2900ms);
    }).join();
    EXPECT_GE(b.stats().wait_chunks, 2u);
}

// The floor the MySQL lock cycle is compared with: GET_LOCK + RELEASE_LOCK on one connection.
TEST(MysqlLock, RawFloorIsMeasured) {
    MysqlConnection c(servers().mysql_options());
    std::vector<double> cycles;
    for (int i = 0; i < 200; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        c.query_one("SELECT GET_LOCK(?, 0) AS got", {std::string("raw-floor")});
        c.query_one("SELECT RELEASE_LOCK(?) AS released", {std::string("raw-floor")});
        cycles.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(cycles.begin(), cycles.end());
    std::cout << "[ measure ] mysql raw GET_LOCK+RELEASE_LOCK p50 " << cycles[100] << " ms\n";
    EXPECT_GT(cycles[100], 0.0);
}

// An account with only SELECT, INSERT, UPDATE and CREATE on the database: no CREATE ROUTINE, no
// SUPER (with the binary log on, not even root may create a data-modifying function without
// log_bin_trust_function_creators: error 1418). Its acquisitions are fenced in the same one
// statement as root's, and the tokens of both accounts on one name form one increasing sequence.
TEST(MysqlLock, AnAccountWithoutCreateRoutineFencesInOneStatement) {
    LOCKSTEP_REQUIRE_OWNED_MYSQL();  // creates a user
    const MysqlOptions root_options = servers().mysql_options();
    MysqlConnection root(root_options);
    root.execute_unprepared("CREATE USER IF NOT EXISTS 'lockstep_limited'@'%' IDENTIFIED BY 'limited-pw'");
    root.execute_unprepared("GRANT SELECT, INSERT, UPDATE, CREATE ON `" + root_options.database +
                            "`.* TO 'lockstep_limited'@'%'");
    MysqlOptions limited = root_options;
    limited.user = "lockstep_limited";
    limited.password = "limited-pw";
    {
        // The premise: this account cannot create a routine (1044: no CREATE ROUTINE).
        MysqlConnection probe(limited);
        EXPECT_THROW(probe.execute_unprepared("CREATE FUNCTION lockstep_probe_v1() RETURNS INT NO SQL RETURN 1"), DbError);
    }
    LockServiceOptions o;
    o.prefix = "mlim:";
    MysqlLockService mine(limited, o), roots(root_options, o);
    auto a = mine.make_mutex("limited");
    auto b = roots.make_mutex("limited");
    FenceToken last = 0;
    for (int i = 0; i < 10; ++i) {
        DistributedMutex& m = i % 2 ? *a : *b;
        std::unique_lock hold(m);
        EXPECT_GT(m.fence_token(), last) << "acquisition " << i;
        last = m.fence_token();
    }
    // On its warm session, one statement per acquisition: GET_LOCK and the token together.
    const MysqlLockStats before = mine.stats();
    for (int i = 0; i < 5; ++i) {
        std::unique_lock hold(*a);
        EXPECT_GT(a->fence_token(), last);
        last = a->fence_token();
    }
    const MysqlLockStats after = mine.stats();
    EXPECT_EQ(after.acquired - before.acquired, 5u);
    EXPECT_EQ(after.acquire_statements - before.acquire_statements, 5u);
    EXPECT_EQ(after.sessions_opened, before.sessions_opened);
}

// A private MariaDB for the tests that restart it or rewrite the epoch row: the shared one
// serves every other test of this binary.
class MysqlLockOwnServer : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        LocalServersOptions o;
        o.redis = false;
        o.use_environment = false;
        server_ = new LocalServers(o);
    }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
    }
    static std::int64_t server_unix_time(MysqlConnection& c) {
        return c.query_one("SELECT UNIX_TIMESTAMP() AS t")->get<std::int64_t>("t");
    }
    static inline LocalServers* server_ = nullptr;
};

// The token's high bits are the server's start-up second: a restarted server starts in a later
// second and every token of its run is above every token of the run before. (A restart within
// the start-up second of the run before would not be: the epoch guard refuses that case, see the
// next test; here the test waits, on the server's clock, until that second has passed.)
TEST_F(MysqlLockOwnServer, TokensStayIncreasingAcrossAServerRestart) {
    LockServiceOptions o;
    o.prefix = "mrs:";
    MysqlLockService service(server_->mysql_options(), o);
    auto m = service.make_mutex("restart");
    FenceToken before = 0;
    {
        std::unique_lock hold(*m);
        before = m->fence_token();
    }
    {
        MysqlConnection c(server_->mysql_options());
        const auto until = std::chrono::steady_clock::now() + 10s;
        while (server_unix_time(c) <= (before >> 24)) {
            ASSERT_LT(std::chrono::steady_clock::now(), until) << "the server's clock did not pass its start-up second";
            std::this_thread::sleep_for(50ms);
        }
    }
    const std::uint64_t writes = service.stats().epoch_writes;
    server_->restart_mysql();  // SIGKILL + start: the pooled session is dead, the lock table gone
    FenceToken after = 0;
    {
        std::unique_lock hold(*m);  // a fresh session on the new run, checked by the epoch guard
        after = m->fence_token();
    }
    EXPECT_GT(after, before);
    EXPECT_GT(after >> 24, before >> 24) << "the start-up second did not grow";
    EXPECT_EQ(service.stats().epoch_writes, writes + 1) << "the new run is recorded once";
    EXPECT_EQ(service.stats().epoch_refusals, 0u);
    // A service that starts now (another process) continues above both.
    MysqlLockService other(server_->mysql_options(), o);
    auto theirs = other.make_mutex("restart");
    std::unique_lock hold(*theirs);
    EXPECT_GT(theirs->fence_token(), after);
}

// What a clock stepped back past the previous start-up (or a fail-over to a server started
// earlier) looks like to the guard: the epoch row holds a token above what this server issues
// now. A new session is refused with a DbError before it draws any token; sessions checked
// before go on.
TEST_F(MysqlLockOwnServer, AServerWhoseTokensWentBackIsRefused) {
    LockServiceOptions o;
    o.prefix = "mback:";
    MysqlLockService early(server_->mysql_options(), o);
    auto m = early.make_mutex("back");
    FenceToken t = 0;
    {
        std::unique_lock hold(*m);
        t = m->fence_token();
    }
    MysqlConnection root(server_->mysql_options());
    const std::int64_t ahead = t + (std::int64_t{3600} << 24);  // an hour of start-up seconds ahead
    root.execute("INSERT INTO lockstep_lock_epoch (id, high) VALUES (1, ?) ON DUPLICATE KEY UPDATE high = ?", {ahead, ahead});
    MysqlLockService late(server_->mysql_options(), o);
    auto refused = late.make_mutex("back");
    try {
        refused->lock();
        ADD_FAILURE() << "a session on a server whose tokens went back acquired, token " << refused->fence_token();
        refused->unlock();
    } catch (const DbError& e) {
        EXPECT_NE(std::string(e.what()).find("went back"), std::string::npos) << e.what();
    }
    EXPECT_EQ(late.stats().epoch_refusals, 1u);
    EXPECT_EQ(late.stats().acquired, 0u);
    {
        std::unique_lock hold(*m);  // the early service's session was checked in its run
        EXPECT_GT(m->fence_token(), t);
    }
    root.execute("UPDATE lockstep_lock_epoch SET high = ? WHERE id = 1", {t});  // as before the test
    std::unique_lock hold(*refused);
    EXPECT_GT(refused->fence_token(), t);
}

}  // namespace
}  // namespace lockstep::test
