// The binlog follower against the private mariadbd and redis-server: C9 (a writer that bypasses
// the library) and C5 (a writer SIGKILLed after COMMIT, before its DEL), each forced open without
// the follower and closed with it, and the follower's recovery: its own restart, a mariadbd
// restart and pause, a Redis pause, a STATEMENT-format session, purged binlogs.
#include <gtest/gtest.h>

#include <signal.h>

#include <thread>

#include "invalidation_test_support.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/invalidation/position_store.h"
#include "lockstep/strategies/write_then_delete.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

class FollowerTest : public ::testing::Test {
protected:
    void SetUp() override {
        prefix_ = fresh_prefix();
        RepositoryOptions o;
        o.key_prefix = prefix_;
        o.strategy = std::make_shared<WriteThenDelete>();
        o.ttl = 60s;
        repo_ = std::make_unique<CachedRepository<Item>>(item_entity(), db(), redis(), o);
        id_ = fresh_id();
        repo_->insert(Item{id_, "widget", 100, 5});
        ASSERT_EQ(repo_->get(id_)->price, 100);  // cached now
        key_ = repo_->key_of(id_);
        ASSERT_EQ(redis().command({"EXISTS", key_}).integer(), 1);
    }
    void TearDown() override {
        // A test may have restarted mariadbd: a pooled connection opened before the restart then
        // fails once with a RetryCall error (2013) and is discarded; the retry gets a new one.
        for (int attempt = 0;; ++attempt) {
            try {
                db().execute("DELETE FROM products WHERE id = ?", {id_});
                return;
            } catch (const Error& e) {
                if (attempt > 0 || e.recovery() != Recovery::RetryCall) throw;
            }
        }
    }

    std::unique_ptr<BinlogInvalidator> follower(const std::string& name) {
        auto f = std::make_unique<BinlogInvalidator>(servers().mysql_options(), redis(), products_map(prefix_),
                                                     follower_options(name));
        f->start();
        EXPECT_TRUE(f->wait_caught_up(10s));
        return f;
    }
    void bypass_update(std::int64_t price) {
        mariadb_client("UPDATE products SET price = " + std::to_string(price) + ", version = version + 1 WHERE id = " +
                       std::to_string(id_));
    }

    std::string prefix_, key_;
    std::int64_t id_ = 0;
    std::unique_ptr<CachedRepository<Item>> repo_;
};

TEST_F(FollowerTest, C9BypassingUpdateStaysStaleWithoutTheFollower) {
    bypass_update(200);
    EXPECT_EQ(db().query_one("SELECT price FROM products WHERE id = ?", {id_})->get<std::int64_t>("price"), 200);
    // Nothing in the library ran: the entry survives for as long as we care to look (its TTL).
    EXPECT_EQ(time_until_gone(key_, 300ms), std::nullopt);
    EXPECT_EQ(repo_->get(id_)->price, 100) << "C9 is open without the follower";
    EXPECT_GT(redis().command({"PTTL", key_}).integer(), 50000);
}

TEST_F(FollowerTest, C9ClosedTheFollowerDeletesTheKeyOfABypassingUpdate) {
    auto f = follower("c9-" + prefix_);
    bypass_update(200);
    auto lag = time_until_gone(key_, 5s);
    ASSERT_TRUE(lag.has_value()) << "the follower did not delete " << key_;
    EXPECT_EQ(repo_->get(id_)->price, 200);
    EXPECT_TRUE(eventually([&] { return f->metrics().transactions >= 1; }));
    auto m = f->metrics();
    EXPECT_GE(m.keys_deleted, 1u);
    std::printf("C9 follower: key gone %lld us after the client returned; follower lag p50 %.0f us p99 %.0f us\n",
                static_cast<long long>(lag->count()), m.lag_p50_us, m.lag_p99_us);
}

TEST_F(FollowerTest, C9ClosedForDeleteAndForAChangedKey) {
    auto f = follower("c9key-" + prefix_);
    std::int64_t moved = fresh_id();
    mariadb_client("UPDATE products SET id = " + std::to_string(moved) + " WHERE id = " + std::to_string(id_));
    ASSERT_TRUE(time_until_gone(key_, 5s).has_value());
    // The new id's key is deleted too (the after image): fill it, delete the row, see it go.
    ASSERT_TRUE(repo_->get(moved).has_value());
    std::string moved_key = repo_->key_of(moved);
    mariadb_client("DELETE FROM products WHERE id = " + std::to_string(moved));
    EXPECT_TRUE(time_until_gone(moved_key, 5s).has_value());
}

// C5: the writer process commits, then is SIGKILLed before its DEL.
TEST_F(FollowerTest, C5WriterKilledAfterCommitLeavesTheEntryStaleWithoutTheFollower) {
    Child writer("writer_dies_after_commit", {{"PREFIX", prefix_}, {"ID", std::to_string(id_)}, {"PRICE", "300"}});
    ASSERT_TRUE(writer.expect("committed", 20s).has_value());
    writer.kill_now();
    EXPECT_EQ(db().query_one("SELECT price FROM products WHERE id = ?", {id_})->get<std::int64_t>("price"), 300);
    EXPECT_EQ(time_until_gone(key_, 300ms), std::nullopt);
    EXPECT_EQ(repo_->get(id_)->price, 100) << "C5 is open: stale until TTL";
}

TEST_F(FollowerTest, C5ClosedTheFollowerDeletesWhatTheKilledWriterCouldNot) {
    auto f = follower("c5-" + prefix_);
    Child writer("writer_dies_after_commit", {{"PREFIX", prefix_}, {"ID", std::to_string(id_)}, {"PRICE", "300"}});
    ASSERT_TRUE(writer.expect("committed", 20s).has_value());
    writer.kill_now();
    auto lag = time_until_gone(key_, 5s);
    ASSERT_TRUE(lag.has_value());
    EXPECT_EQ(repo_->get(id_)->price, 300);
}

TEST_F(FollowerTest, ResumesFromItsSavedPositionAfterItStops) {
    std::string name = "resume-" + prefix_;
    {
        auto f = follower(name);
        f->stop();
    }
    bypass_update(400);  // while no follower runs
    EXPECT_EQ(time_until_gone(key_, 200ms), std::nullopt);
    auto f = follower(name);  // same name: starts from the saved position, not from now
    EXPECT_TRUE(time_until_gone(key_, 5s).has_value());
}

TEST_F(FollowerTest, SurvivesAMariadbRestart) {
    LOCKSTEP_REQUIRE_OWNED_MYSQL();
    auto f = follower("restart-" + prefix_);
    servers().restart_mysql();
    bypass_update(500);
    EXPECT_TRUE(time_until_gone(key_, 15s).has_value());
    EXPECT_GE(f->metrics().reconnects, 1u);
}

TEST_F(FollowerTest, APausedMariadbIsDetectedByTheReadTimeout) {
    LOCKSTEP_REQUIRE_OWNED_MYSQL();
    auto f = follower("paused-" + prefix_);
    auto before = f->metrics().reconnects;
    ::kill(servers().mysql_pid(), SIGSTOP);
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (f->metrics().reconnects == before && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
    ::kill(servers().mysql_pid(), SIGCONT);
    EXPECT_GT(f->metrics().reconnects, before) << "a paused server must not block the follower forever";
    bypass_update(600);
    EXPECT_TRUE(time_until_gone(key_, 15s).has_value());
}

TEST_F(FollowerTest, APausedRedisDelaysTheDeleteButDoesNotLoseIt) {
    LOCKSTEP_REQUIRE_OWNED_REDIS();
    auto f = follower("redis-" + prefix_);
    ::kill(servers().redis_pid(), SIGSTOP);
    bypass_update(700);
    // The follower's DEL cannot land while Redis is paused; wait until it has tried and failed.
    auto deadline = std::chrono::steady_clock::now() + 20s;
    while (f->metrics().redis_errors == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
    ::kill(servers().redis_pid(), SIGCONT);
    EXPECT_GE(f->metrics().redis_errors, 1u);
    EXPECT_TRUE(time_until_gone(key_, 15s).has_value());
}

TEST_F(FollowerTest, AStatementFormatChangeFlushesTheEntity) {
    auto f = follower("stmt-" + prefix_);
    mariadb_client("SET SESSION binlog_format = 'STATEMENT'; UPDATE products SET price = 800 WHERE id = " +
                   std::to_string(id_));
    EXPECT_TRUE(time_until_gone(key_, 5s).has_value());
    EXPECT_GE(f->metrics().statement_events, 1u);
    EXPECT_TRUE(eventually([&] { return f->metrics().flushes >= 1; }));
}

TEST_F(FollowerTest, PurgedBinlogsMeanAFullFlush) {
    std::string name = "purged-" + prefix_;
    {
        auto f = follower(name);
        f->stop();
    }
    bypass_update(900);  // after the saved position, in the binlog about to be purged
    // PURGE skips a file a dump thread still reads: wait until the stopped follower's is gone.
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (db().query_one("SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
                   ->get<std::int64_t>("n") > 0 &&
           std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(10ms);
    }
    // PURGE also skips a file InnoDB may still need for crash recovery (until its binlog
    // checkpoint): repeat until only the active file is left.
    do {
        mariadb_client("FLUSH BINARY LOGS");
        mariadb_client("PURGE BINARY LOGS BEFORE NOW() + INTERVAL 1 DAY");
    } while (db().query("SHOW BINARY LOGS").size() > 1 && std::chrono::steady_clock::now() < deadline);
    ASSERT_EQ(db().query("SHOW BINARY LOGS").size(), 1u);
    auto f = follower(name);
    EXPECT_TRUE(time_until_gone(key_, 5s).has_value());
    EXPECT_TRUE(eventually([&] { return f->metrics().positions_lost == 1; }));
}

}  // namespace
}  // namespace lockstep::test
