// The follower's batched flush (docs/invalidation.md, "The follower's flush"): the first DELs of
// every transaction it has buffered go out in one pipeline, and the applied / saved position
// still only moves past a transaction once its DELs and those of every transaction before it
// were acknowledged (at-least-once; C5, C9).
//
// Forcing a batch: the follower is held at invalidation.after_stream_open (its dump connection
// open, nothing read yet) while N single-row transactions commit; the test waits until the
// server's dump thread reports it has sent the whole binlog (so the N transactions are in the
// follower's socket), then lets it go. It decodes all N before the stream runs dry, so they are
// flushed together: counted by InvalidatorMetrics::delete_pipelines (round trips).
//
// Forcing an error mid-batch: a Redis ACL user that may touch every key of the batch but one;
// the DEL of that key is answered NOPERM (a real error reply, in place, in the middle of the
// pipeline) while the DELs around it succeed.
#include <gtest/gtest.h>

#include <unistd.h>

#include <string>
#include <vector>

#include "invalidation_test_support.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/invalidation/binlog_stream.h"
#include "lockstep/invalidation/fault_points.h"
#include "lockstep/invalidation/position_store.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

class BatchedFlushTest : public ::testing::Test {
protected:
    static constexpr int kRows = 12;

    void SetUp() override {
        prefix_ = fresh_prefix();
        const InvalidationMap map = products_map(prefix_);
        for (int i = 0; i < kRows; ++i) {
            std::int64_t id = fresh_id();
            db().execute("INSERT INTO products (id, name, price, stock) VALUES (?, 'batched', 1, 1)", {id});
            ids_.push_back(id);
            keys_.push_back(map.key(map.bindings()[0], id));
        }
    }
    void TearDown() override {
        for (auto id : ids_) db().execute("DELETE FROM products WHERE id = ?", {id});
    }

    // A follower whose every batch bound is far away: only the stream running dry flushes.
    BinlogInvalidatorOptions options(const std::string& name) {
        BinlogInvalidatorOptions o = follower_options(name + prefix_);
        o.batch_max_wait = std::chrono::seconds(30);
        o.batch_max_transactions = 1000;
        o.batch_max_keys = 100000;
        return o;
    }

    // Holds the follower just after its dump connection opened, commits one UPDATE per row (one
    // transaction each; the GTID state after each is returned), waits until the server has sent
    // them all, then releases it.
    std::vector<std::string> commit_backlog(BinlogInvalidator& f) {
        fault::Gate gate;
        auto armed = fault::arm(std::string(invalidation_points::after_stream_open), gate.action(), {.times = 1});
        f.start();
        EXPECT_TRUE(gate.wait_arrivals(1, 20s)) << "the follower never opened its stream";
        std::vector<std::string> gtids;
        for (auto id : ids_) {
            db().execute("UPDATE products SET price = price + 1, version = version + 1 WHERE id = ?", {id});
            gtids.push_back(BinlogStream::current_gtid(servers().mysql_options()));
        }
        // Every dump thread idle at the end of the binlog: the backlog is in the follower's socket.
        EXPECT_TRUE(eventually(
            [] {
                auto busy = db().query_one(
                    "SELECT COUNT(*) AS busy FROM information_schema.PROCESSLIST WHERE COMMAND = 'Binlog Dump' "
                    "AND STATE NOT LIKE 'Master has sent all binlog to slave%'");
                auto all = db().query_one(
                    "SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE COMMAND = 'Binlog Dump'");
                return busy->get<std::int64_t>("busy") == 0 && all->get<std::int64_t>("n") >= 1;
            },
            20s))
            << "the dump thread did not send the backlog";
        gate.open();
        return gtids;
    }

    void fill_keys() {
        for (const auto& key : keys_) redis().set(key, "stale", 60s);
    }
    bool exists(const std::string& key) { return redis().command({"EXISTS", key}).integer() == 1; }

    std::string prefix_;
    std::vector<std::int64_t> ids_;
    std::vector<std::string> keys_;
};

TEST_F(BatchedFlushTest, ABacklogOfTransactionsIsDeletedInOnePipeline) {
    fill_keys();
    BinlogInvalidator f(servers().mysql_options(), redis(), products_map(prefix_), options("batch-"));
    std::vector<std::string> gtids = commit_backlog(f);
    ASSERT_TRUE(f.wait_caught_up(20s));
    for (const auto& key : keys_) EXPECT_FALSE(exists(key)) << key;
    InvalidatorMetrics m = f.metrics();
    EXPECT_EQ(m.transactions, static_cast<std::uint64_t>(kRows));
    EXPECT_EQ(m.delete_pipelines, 1u) << "one round trip for the whole backlog";
    EXPECT_EQ(m.delete_batches, 1u);
    EXPECT_EQ(m.keys_deleted, static_cast<std::uint64_t>(kRows));
    EXPECT_EQ(m.redis_errors, 0u);
    EXPECT_EQ(m.applied_gtid, gtids.back());
    // The second DEL still runs for each, and the saved position follows it.
    EXPECT_TRUE(eventually([&] { return f.metrics().second_keys_deleted == static_cast<std::uint64_t>(kRows); }));
    EXPECT_TRUE(eventually([&] { return f.metrics().saved_gtid == gtids.back(); }));
}

TEST_F(BatchedFlushTest, AnErrorReplyMidBatchKeepsThePositionBeforeTheFirstUnacknowledgedTransaction) {
    LOCKSTEP_REQUIRE_OWNED_REDIS();
    constexpr int kDenied = 5;  // the DEL of this row's key is answered NOPERM
    const std::string user = "flw" + std::to_string(::getpid()) + "_" + std::to_string(fresh_id() % 1000);
    std::vector<std::string> acl = {"ACL", "SETUSER", user, "reset", "on", ">pw", "+@all"};
    for (int i = 0; i < kRows; ++i) {
        if (i != kDenied) acl.push_back("~" + keys_[i]);
    }
    redis().command(acl).throw_if_error();
    RedisOptions limited_options = servers().redis_options();
    limited_options.user = user;
    limited_options.password = "pw";
    RedisClient limited(limited_options);

    fill_keys();
    BinlogInvalidatorOptions o = options("batch-error-");
    o.retry_min = 10ms;
    o.retry_max = 50ms;
    const std::string name = o.name;
    BinlogInvalidator f(servers().mysql_options(), limited, products_map(prefix_), o);
    std::vector<std::string> gtids = commit_backlog(f);

    // Several failed attempts: each would have moved the position if it could.
    ASSERT_TRUE(eventually([&] { return f.metrics().redis_errors >= 4; }, 20s));
    // The rows before the denied one were acknowledged, applied, second-deleted and saved.
    ASSERT_TRUE(eventually([&] { return f.metrics().saved_gtid == gtids[kDenied - 1]; }, 20s));
    InvalidatorMetrics m = f.metrics();
    EXPECT_EQ(m.applied_gtid, gtids[kDenied - 1]) << "applied past the first unacknowledged transaction";
    EXPECT_EQ(m.transactions, static_cast<std::uint64_t>(kDenied));
    EXPECT_GE(m.delete_pipelines, 4u);
    for (int i = 0; i < kDenied; ++i) EXPECT_FALSE(exists(keys_[i])) << i;
    EXPECT_TRUE(exists(keys_[kDenied]));
    {
        PositionStore store(servers().mysql_options());
        EXPECT_EQ(store.load(name), gtids[kDenied - 1]) << "the durable position ran ahead of the deletes";
    }

    // Redis lets it through: the rest lands, every key is gone, the position reaches the end.
    redis().command({"ACL", "SETUSER", user, "allkeys"}).throw_if_error();
    ASSERT_TRUE(f.wait_caught_up(20s));
    for (const auto& key : keys_) EXPECT_FALSE(exists(key)) << key;
    EXPECT_EQ(f.metrics().applied_gtid, gtids.back());
    EXPECT_TRUE(eventually([&] { return f.metrics().saved_gtid == gtids.back(); }, 20s));
    f.stop();
    redis().command({"ACL", "DELUSER", user}).throw_if_error();
}

}  // namespace
}  // namespace lockstep::test
