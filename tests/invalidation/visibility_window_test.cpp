// The follower's visibility window (docs/invalidation.md, "The visibility window"): MariaDB hands
// a transaction's events to the dump thread just before its commit is visible to other sessions,
// so a reader that misses in that gap reads the old row and caches it AFTER the follower's DEL.
// Forced here without depending on that microsecond gap: the reader is held between its SELECT
// (repo.after_db_read, old row read) and its SET until the follower's first DEL has landed (the
// follower's re-delete thread reaching invalidation.before_second_delete proves it, since a group
// is queued for its second DEL only after its first landed). Then:
//   - second_delete_delay = 0: the reader's old row stays cached (stale until TTL);
//   - the default second DEL, released only after the reader's SET: the entry is removed.
#include <gtest/gtest.h>

#include <thread>

#include "invalidation_test_support.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/invalidation/fault_points.h"
#include "lockstep/strategies/fault_points.h"
#include "lockstep/strategies/write_then_delete.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

class VisibilityWindowTest : public ::testing::Test {
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
        key_ = repo_->key_of(id_);
        redis().command({"DEL", key_});  // the reader below misses
    }
    void TearDown() override { db().execute("DELETE FROM products WHERE id = ?", {id_}); }

    std::unique_ptr<BinlogInvalidator> follower(std::chrono::milliseconds second_delete_delay) {
        BinlogInvalidatorOptions o = follower_options("vis-" + prefix_);
        o.second_delete_delay = second_delete_delay;
        auto f = std::make_unique<BinlogInvalidator>(servers().mysql_options(), redis(), products_map(prefix_), o);
        f->start();
        EXPECT_TRUE(f->wait_caught_up(10s));
        return f;
    }

    // Starts the reader and waits until it has read the row (v1, price 100) and stopped before
    // its SET; then a plain client commits v2 (price 200), bypassing the library.
    void read_old_row_then_commit() {
        reader_ = std::thread([this] { read_price_ = repo_->get(id_)->price; });
        ASSERT_TRUE(reader_gate_.wait_arrivals(1, 20s)) << "the reader never reached its fill";
        mariadb_client("UPDATE products SET price = 200, version = version + 1 WHERE id = " + std::to_string(id_));
    }
    // Lets the reader SET the row it read, and waits for it.
    void let_the_reader_fill() {
        reader_gate_.open();
        reader_.join();
        reader_armed_.disarm();
        EXPECT_EQ(read_price_, 100) << "the reader must have read the row before the commit";
        ASSERT_EQ(redis().command({"EXISTS", key_}).integer(), 1) << "the reader's SET landed after the first DEL";
        EXPECT_EQ(repo_->get(id_)->price, 100) << "the old row is cached after the follower's first DEL";
    }

    std::string prefix_, key_;
    std::int64_t id_ = 0;
    std::unique_ptr<CachedRepository<Item>> repo_;
    fault::Gate reader_gate_;
    fault::Arming reader_armed_ = fault::arm(std::string(repo_points::after_db_read), reader_gate_.action());
    std::thread reader_;
    std::int64_t read_price_ = 0;
};

TEST_F(VisibilityWindowTest, WithoutTheSecondDeleteAFillInTheGapStaysStale) {
    auto f = follower(0ms);
    const auto before = f->metrics().keys_deleted;
    read_old_row_then_commit();
    // The follower's only DEL landed (the metric is bumped just after it).
    ASSERT_TRUE(eventually([&] { return f->metrics().keys_deleted > before; }, 10s));
    let_the_reader_fill();
    EXPECT_EQ(time_until_gone(key_, 300ms), std::nullopt) << "nothing deletes it again";
    EXPECT_EQ(repo_->get(id_)->price, 100) << "stale until its TTL";
    EXPECT_GT(redis().command({"PTTL", key_}).integer(), 50000);
    EXPECT_EQ(f->metrics().second_keys_deleted, 0u);
}

TEST_F(VisibilityWindowTest, TheSecondDeleteRemovesAFillThatLandedAfterTheFirst) {
    fault::Gate second_gate;
    auto second_armed = fault::arm(std::string(invalidation_points::before_second_delete), second_gate.action());
    auto f = follower(50ms);
    read_old_row_then_commit();
    // The group reaches its second DEL only after its first landed: the gap is open now.
    ASSERT_TRUE(second_gate.wait_arrivals(1, 20s)) << "the follower never queued a second DEL";
    let_the_reader_fill();
    second_gate.open();
    ASSERT_TRUE(time_until_gone(key_, 10s).has_value()) << "the second DEL must remove the gap's fill";
    EXPECT_EQ(repo_->get(id_)->price, 200);
    EXPECT_TRUE(eventually([&] { return f->metrics().second_keys_deleted >= 1; }));
    EXPECT_TRUE(eventually([&] { return f->metrics().second_pending == 0; }));
}

// The saved position covers only groups whose second DEL landed: stopped while a second DEL is
// held, the follower drains it on stop (it lands), and a restart under the same name starts after it.
TEST_F(VisibilityWindowTest, StopDrainsTheQueuedSecondDeletesBeforeSavingThePosition) {
    reader_armed_.disarm();
    auto f = follower(10s);  // far longer than the test: only the drain on stop() can send it
    redis().set(key_, "v1:stale", 60s);
    mariadb_client("UPDATE products SET price = 300, version = version + 1 WHERE id = " + std::to_string(id_));
    ASSERT_TRUE(time_until_gone(key_, 10s).has_value());  // the first DEL
    redis().set(key_, "v1:stale-again", 60s);              // a fill in the gap
    EXPECT_TRUE(eventually([&] { return f->metrics().second_pending == 1; }));
    f->stop();
    EXPECT_EQ(redis().command({"EXISTS", key_}).integer(), 0) << "stop() sends the queued second DEL";
    EXPECT_EQ(f->metrics().second_pending, 0u);
    EXPECT_EQ(f->metrics().saved_gtid, f->metrics().applied_gtid);
}

}  // namespace
}  // namespace lockstep::test
