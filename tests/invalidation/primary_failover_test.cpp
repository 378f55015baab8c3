// The follower through a primary failover, against a private MariaDB primary and a GTID replica
// (log_slave_updates) started for each test. The replica runs read-only until it is promoted;
// the follower is given it as a failover source. The primary is SIGKILLed, the replica promoted
// (replication stopped and reset, read_only = 0), and the follower, which finds the old primary
// gone, moves to the writable one and resumes there by GTID.
//   - Every write reached the replica: nothing skipped, nothing flushed, every row counted once.
//   - The same when the primary is demoted (read_only) and stays up: the follower notices.
//   - Writes the follower applied never reached the replica (its SQL thread stopped: the async
//     replication loss of a real failover): the new primary does not have the follower's
//     position; the follower flushes every bound entity's keys (an entry cached from a row the
//     new primary no longer has goes), says so, counts it, and follows the new primary.
//   - lockstep-invalidator with the replica in its "failover" list does the same as a process.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "invalidation_test_support.h"
#include "lockstep/core/uri.h"
#include "lockstep/servers/demo_schema.h"
#include "lockstep/invalidation/position_store.h"
#include "lockstep/servers/local_servers.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

void run_on(MysqlPool& pool, const std::string& sql) { pool.acquire()->execute_unprepared(sql); }

class PrimaryFailoverTest : public ::testing::Test {
protected:
    void SetUp() override {
        LocalServersOptions o;
        o.redis = false;
        o.use_environment = false;
        o.mysql_replica = true;
        servers_ = std::make_unique<LocalServers>(o);
        primary_ = std::make_unique<MysqlPool>(servers_->mysql_options());
        lockstep::testing::bootstrap_demo_schema(*primary_);
        replica_ = std::make_unique<MysqlPool>(servers_->mysql_replica_options());
        prefix_ = fresh_prefix();
        for (int i = 0; i < 120; ++i) ids_.push_back(fresh_id());
        for (auto id : ids_) {
            primary_->execute("INSERT INTO products (id, name, price, stock, version) VALUES (?, 'p', 1, 1, 1)", {id});
        }
        servers_->wait_for_replica();
        run_on(*replica_, "SET GLOBAL read_only = 1");  // a replica until promoted
    }
    void TearDown() override {
        follower_.reset();
        for (auto id : ids_) redis().command({"DEL", key(id)});
    }

    void start_follower() {
        auto o = follower_options("failover-" + prefix_);
        o.failover_sources = {servers_->mysql_replica_options()};
        o.retry_max = 200ms;
        follower_ = std::make_unique<BinlogInvalidator>(servers_->mysql_options(), redis(), products_map(prefix_), o);
        follower_->start();
        ASSERT_TRUE(follower_->wait_caught_up(20s));
    }

    std::string key(std::int64_t id) const { return prefix_ + "{product:" + std::to_string(id) + "}"; }

    // Write i on `pool`: its key cached first, so only the follower's DEL removes it.
    void write(MysqlPool& pool, int i) {
        redis().set(key(ids_[i]), "cached-before-the-write", 300s);
        pool.execute("UPDATE products SET price = price + 1, version = version + 1 WHERE id = ?", {ids_[i]});
    }

    std::vector<std::string> stale_keys(int from, int to) {
        std::vector<std::string> out;
        for (int i = from; i < to; ++i) {
            if (redis().command({"EXISTS", key(ids_[i])}).integer() != 0) out.push_back(key(ids_[i]));
        }
        return out;
    }

    // SIGKILL the primary and promote the replica; returns when the replica takes writes.
    Clock::time_point fail_over() {
        servers_->kill_mysql();
        const auto killed = Clock::now();
        run_on(*replica_, "STOP SLAVE");
        run_on(*replica_, "RESET SLAVE ALL");
        run_on(*replica_, "SET GLOBAL read_only = 0");
        return killed;
    }

    std::unique_ptr<LocalServers> servers_;
    std::unique_ptr<MysqlPool> primary_, replica_;
    std::unique_ptr<BinlogInvalidator> follower_;
    std::string prefix_;
    std::vector<std::int64_t> ids_;
};

TEST_F(PrimaryFailoverTest, TheFollowerMovesToThePromotedReplicaByGtidAndSkipsNothing) {
    start_follower();
    for (int i = 0; i < 60; ++i) write(*primary_, i);
    servers_->wait_for_replica();  // every write reached the replica before the primary dies
    ASSERT_TRUE(follower_->wait_caught_up(20s));
    ASSERT_EQ(stale_keys(0, 60), std::vector<std::string>{});

    const auto killed = fail_over();
    // The first write on the new primary: the time until its key is gone spans the follower's
    // detection of the dead primary, its move, and the delete.
    const auto first_write = Clock::now();
    write(*replica_, 60);
    const auto gone = time_until_gone(key(ids_[60]), 30s);
    ASSERT_TRUE(gone.has_value()) << "the follower never followed the promoted replica";
    for (int i = 61; i < 120; ++i) write(*replica_, i);
    ASSERT_TRUE(eventually([&] { return follower_->metrics().source_switches == 1; }, 20s));
    ASSERT_TRUE(follower_->wait_caught_up(20s));

    const InvalidatorMetrics m = follower_->metrics();
    std::fprintf(stderr,
                 "failover: SIGKILL -> promoted %lld ms; first write on the new primary -> its key deleted %lld ms; "
                 "follower gap (last event of the old primary -> first of the new) %.1f ms\n",
                 static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(first_write - killed).count()),
                 static_cast<long long>(gone->count() / 1000), m.failover_gap_ms);
    EXPECT_EQ(stale_keys(0, 120), std::vector<std::string>{}) << "invalidations skipped across the failover";
    EXPECT_EQ(m.rows, 120u) << "every write counted exactly once";
    EXPECT_EQ(m.positions_lost, 0u);
    EXPECT_EQ(m.flushes, 0u);
    EXPECT_EQ(m.source, servers_->mysql_replica_options().host + ":" + std::to_string(servers_->mysql_replica_options().port));
    EXPECT_GT(m.failover_gap_ms, 0);
    // The position now lives on the new primary.
    PositionStore store(servers_->mysql_replica_options());
    EXPECT_TRUE(eventually([&] { return store.load("failover-" + prefix_) == follower_->metrics().applied_gtid; }, 20s));
}

TEST_F(PrimaryFailoverTest, ADemotedPrimaryThatStaysUpIsLeftForThePromotedReplica) {
    start_follower();
    for (int i = 0; i < 30; ++i) write(*primary_, i);
    // A planned switchover: the primary turns read-only and stays up, the replica catches up and
    // is promoted. The follower's stream to the old primary never breaks.
    run_on(*primary_, "SET GLOBAL read_only = 1");
    servers_->wait_for_replica();
    run_on(*replica_, "STOP SLAVE");
    run_on(*replica_, "RESET SLAVE ALL");
    run_on(*replica_, "SET GLOBAL read_only = 0");
    for (int i = 30; i < 60; ++i) write(*replica_, i);
    ASSERT_TRUE(eventually([&] { return follower_->metrics().source_switches == 1; }, 20s))
        << "the follower stayed on the demoted primary";
    ASSERT_TRUE(follower_->wait_caught_up(20s));
    const InvalidatorMetrics m = follower_->metrics();
    EXPECT_EQ(stale_keys(0, 60), std::vector<std::string>{});
    EXPECT_EQ(m.rows, 60u) << "every write counted exactly once";
    EXPECT_EQ(m.positions_lost, 0u);
    EXPECT_EQ(m.flushes, 0u);
    EXPECT_EQ(m.source, servers_->mysql_replica_options().host + ":" + std::to_string(servers_->mysql_replica_options().port));
}

TEST_F(PrimaryFailoverTest, APositionTheNewPrimaryLacksFlushesEveryBoundEntityAndIsCounted) {
    start_follower();
    for (int i = 0; i < 20; ++i) write(*primary_, i);
    servers_->wait_for_replica();
    run_on(*replica_, "STOP SLAVE SQL_THREAD");  // what follows never reaches the replica
    for (int i = 20; i < 40; ++i) write(*primary_, i);
    ASSERT_TRUE(follower_->wait_caught_up(20s));  // the follower applied writes the replica lacks
    // An entry cached from the primary's row after those writes: the new primary's row is older.
    redis().set(key(ids_[30]), "cached-from-a-write-the-new-primary-lacks", 300s);
    redis().set(key(ids_[100]), "cached-unrelated-entry", 300s);

    fail_over();
    ASSERT_TRUE(eventually([&] { return follower_->metrics().positions_lost == 1; }, 30s))
        << "the follower did not detect the position the new primary lacks";
    EXPECT_TRUE(eventually([&] { return follower_->metrics().flushes >= 1; }, 20s));
    EXPECT_EQ(redis().command({"EXISTS", key(ids_[30])}).integer(), 0) << "the flush left an entry of a lost write";
    EXPECT_EQ(redis().command({"EXISTS", key(ids_[100])}).integer(), 0) << "the flush is of the whole entity";
    // And it follows the new primary from there.
    for (int i = 40; i < 60; ++i) write(*replica_, i);
    ASSERT_TRUE(follower_->wait_caught_up(20s));
    EXPECT_EQ(stale_keys(40, 60), std::vector<std::string>{});
    const InvalidatorMetrics m = follower_->metrics();
    EXPECT_EQ(m.source_switches, 1u);
    std::fprintf(stderr, "failover to a primary lacking the position: %llu keys flushed, gap %.1f ms\n",
                 static_cast<unsigned long long>(m.flushed_keys), m.failover_gap_ms);
}

TEST_F(PrimaryFailoverTest, TheDaemonFollowsThePromotedReplicaOfItsFailoverList) {
    const auto self = std::filesystem::read_symlink("/proc/self/exe");
    const std::string path = (self.parent_path().parent_path() / "invalidation" / "tools" / "lockstep-invalidator").string();
    ASSERT_TRUE(std::filesystem::exists(path)) << "build lockstep-invalidator first";
    const auto config = std::filesystem::temp_directory_path() / ("lsinv_failover_" + prefix_.substr(0, prefix_.size() - 1) + ".json");
    {
        nlohmann::json c = {{"mysql", to_url(servers_->mysql_options())},
                            {"failover", {to_url(servers_->mysql_replica_options())}},
                            {"redis", to_url(servers().redis_options())},
                            {"name", "failover-daemon-" + prefix_},
                            {"server_id", fresh_server_id()},
                            {"heartbeat_ms", 100},
                            {"flush_on_fresh_start", false},
                            {"tables", {{{"table", "products"}, {"entity", "product"}, {"prefix", prefix_}}}}};
        std::ofstream(config) << c.dump();
    }
    Child d({path, "--config", config.string(), "--progress", "0.1"});
    std::optional<nlohmann::json> last;
    auto latest = [&]() -> const nlohmann::json& {
        while (auto line = d.expect("{", 5ms)) last = nlohmann::json::parse(*line);
        return *last;
    };
    ASSERT_TRUE(eventually([&] { return latest(), last && last->at("connected").get<bool>(); }, 30s));
    for (int i = 0; i < 20; ++i) write(*primary_, i);
    servers_->wait_for_replica();
    fail_over();
    for (int i = 20; i < 40; ++i) write(*replica_, i);
    ASSERT_TRUE(eventually([&] { return latest().at("source_switches").get<int>() == 1 && stale_keys(0, 40).empty(); }, 30s))
        << "stale: " << stale_keys(0, 40).size();
    EXPECT_EQ(latest().at("positions_lost").get<int>(), 0);
    EXPECT_EQ(d.terminate(20s), 0);
    std::filesystem::remove(config);
}

}  // namespace
}  // namespace lockstep::test
