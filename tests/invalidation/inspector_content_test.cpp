// The consistency inspector judges content, not only versions: three writers that leave
// `version` alone (a plain UPDATE, a trigger, the db-level fenced_update) leave a stale entry it
// counts with no follower running, and a fresh one once the follower has caught up (its check is
// held at invalidation.before_inspector_check until then: no race between the two).
#include <gtest/gtest.h>

#include "invalidation_test_support.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/db/fenced_write.h"
#include "lockstep/invalidation/consistency_inspector.h"
#include "lockstep/invalidation/fault_points.h"
#include "lockstep/strategies/write_then_delete.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

enum class Writer { PlainUpdate, Trigger, FencedUpdate };

class InspectorContentTest : public ::testing::TestWithParam<Writer> {
protected:
    static void SetUpTestSuite() {
        db();  // the schema
        mariadb_client(
            "CREATE TABLE IF NOT EXISTS inv_restock (product_id BIGINT NOT NULL, qty INT NOT NULL) ENGINE=InnoDB;"
            "DROP TRIGGER IF EXISTS inv_restock_adds_stock;"
            "CREATE TRIGGER inv_restock_adds_stock AFTER INSERT ON inv_restock FOR EACH ROW "
            "UPDATE products SET stock = stock + NEW.qty WHERE id = NEW.product_id;");
    }
    void SetUp() override {
        prefix_ = fresh_prefix();
        RepositoryOptions o;
        o.key_prefix = prefix_;
        o.strategy = std::make_shared<WriteThenDelete>();
        o.ttl = 60s;
        repo_ = std::make_unique<CachedRepository<Item>>(item_entity(), db(), redis(), o);
        id_ = fresh_id();
        repo_->insert(Item{id_, "widget", 100, 5});
        ASSERT_EQ(repo_->get(id_)->stock, 5);  // cached
        key_ = repo_->key_of(id_);
    }
    void TearDown() override { db().execute("DELETE FROM products WHERE id = ?", {id_}); }

    std::unique_ptr<ConsistencyInspector> inspector() {
        InspectorOptions o;
        o.server_id = fresh_server_id();
        o.check_after = 100ms;
        o.recheck_every = 20ms;
        o.heartbeat = 100ms;
        auto i = std::make_unique<ConsistencyInspector>(servers().mysql_options(), redis(), products_map(prefix_), o);
        i->compare_content(inspected_entity(item_entity(), prefix_));
        i->start();
        EXPECT_TRUE(i->wait_connected(10s));
        return i;
    }
    // The write under test: stock changes, version does not.
    void write() {
        switch (GetParam()) {
            case Writer::PlainUpdate: db().execute("UPDATE products SET stock = stock + 7 WHERE id = ?", {id_}); break;
            case Writer::Trigger: db().execute("INSERT INTO inv_restock (product_id, qty) VALUES (?, 3)", {id_}); break;
            case Writer::FencedUpdate:
                ASSERT_TRUE(fenced_update(db(), id_, 10, {.assignments = "stock = stock - 1", .table = "products"}));
                break;
        }
        auto row = db().query_one("SELECT stock FROM products WHERE id = ?", {id_});
        ASSERT_NE(row->get<int>("stock"), 5) << "the write changed the row";
    }

    std::string prefix_, key_;
    std::int64_t id_ = 0;
    std::unique_ptr<CachedRepository<Item>> repo_;
};

TEST_P(InspectorContentTest, WithoutTheFollowerTheEntryIsCountedStaleThoughItsVersionIsCurrent) {
    auto i = inspector();
    write();
    ASSERT_TRUE(eventually([&] { return i->metrics().checked >= 1; }, 10s));
    auto m = i->metrics();
    EXPECT_EQ(m.stale, 1u);
    EXPECT_EQ(m.stale_by_content, 1u) << "the version alone says fresh";
    EXPECT_EQ(m.stale_open, 1u);
    ASSERT_FALSE(m.tables.empty());
    std::uint64_t table_stale = 0;
    for (const auto& [name, t] : m.tables) table_stale += t.stale_by_content;
    EXPECT_EQ(table_stale, 1u);
    redis().command({"DEL", key_});
    ASSERT_TRUE(eventually([&] { return i->metrics().stale_open == 0; }, 10s));
    EXPECT_GE(i->metrics().staleness_p50_ms, 100.0);
}

TEST_P(InspectorContentTest, WithTheFollowerTheEntryIsCountedFreshOnceItCaughtUp) {
    BinlogInvalidator follower(servers().mysql_options(), redis(), products_map(prefix_),
                               follower_options("content-" + prefix_));
    follower.start();
    ASSERT_TRUE(follower.wait_caught_up(10s));
    auto i = inspector();
    fault::Gate gate;
    auto armed = fault::arm(std::string(invalidation_points::before_inspector_check), gate.action());
    write();
    ASSERT_TRUE(gate.wait_arrivals(1, 10s)) << "the inspector's check is due";
    ASSERT_TRUE(follower.wait_caught_up(10s));
    gate.open();
    ASSERT_TRUE(eventually([&] { return i->metrics().checked >= 1; }, 10s));
    auto m = i->metrics();
    EXPECT_EQ(m.stale, 0u);
    EXPECT_EQ(redis().command({"EXISTS", key_}).integer(), 0) << "fresh because the follower deleted the key";
    std::printf("content check with the follower: fresh; follower lag p50 %.0f us p99 %.0f us\n",
                follower.metrics().lag_p50_us, follower.metrics().lag_p99_us);
}

INSTANTIATE_TEST_SUITE_P(OutsideWriters, InspectorContentTest,
                         ::testing::Values(Writer::PlainUpdate, Writer::Trigger, Writer::FencedUpdate),
                         [](const auto& info) {
                             switch (info.param) {
                                 case Writer::PlainUpdate: return std::string("PlainUpdateLeavingVersionAlone");
                                 case Writer::Trigger: return std::string("ColumnWrittenByATrigger");
                                 default: return std::string("DbLevelFencedUpdate");
                             }
                         });

}  // namespace
}  // namespace lockstep::test
