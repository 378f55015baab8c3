// The consistency inspector against the private servers: a stale entry forced (a bypassing
// UPDATE with no follower running, C9) is counted, re-read until fresh and its staleness timed;
// with the follower running the same write leaves nothing stale.
#include <gtest/gtest.h>

#include "invalidation_test_support.h"
#include "lockstep/invalidation/consistency_inspector.h"
#include "lockstep/strategies/write_then_delete.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

class InspectorTest : public ::testing::Test {
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
        ASSERT_EQ(repo_->get(id_)->price, 100);  // cached: v1
        key_ = repo_->key_of(id_);
    }
    void TearDown() override { db().execute("DELETE FROM products WHERE id = ?", {id_}); }

    std::unique_ptr<ConsistencyInspector> inspector(std::chrono::milliseconds check_after) {
        InspectorOptions o;
        o.server_id = fresh_server_id();
        o.check_after = check_after;
        o.recheck_every = 20ms;
        o.heartbeat = 100ms;
        auto i = std::make_unique<ConsistencyInspector>(servers().mysql_options(), redis(), products_map(prefix_), o);
        i->start();
        EXPECT_TRUE(i->wait_connected(10s));
        return i;
    }
    void bypass_update() {
        // A plain statement on a pooled connection: no repository code runs (C9).
        db().execute("UPDATE products SET price = 200, version = version + 1 WHERE id = ?", {id_});
    }

    std::string prefix_, key_;
    std::int64_t id_ = 0;
    std::unique_ptr<CachedRepository<Item>> repo_;
};

TEST_F(InspectorTest, CountsTheStaleEntryABypassingUpdateLeavesAndTimesItUntilFresh) {
    auto i = inspector(100ms);
    bypass_update();
    ASSERT_TRUE(eventually([&] { return i->metrics().stale == 1; }, 10s)) << "stale " << i->metrics().stale;
    auto m = i->metrics();
    EXPECT_EQ(m.checked, 1u);
    EXPECT_EQ(m.stale_open, 1u) << "still stale: nothing deleted it";
    EXPECT_EQ(m.stale_per_million, 1e6);
    // A late invalidation (here by hand; a TTL would do the same) ends the staleness.
    redis().command({"DEL", key_});
    ASSERT_TRUE(eventually([&] { return i->metrics().stale_open == 0; }, 10s));
    m = i->metrics();
    EXPECT_GE(m.staleness_p50_ms, 100.0) << "stale from the write until the DEL, at least check_after";
    EXPECT_EQ(m.stale_given_up, 0u);
}

TEST_F(InspectorTest, WithTheFollowerRunningTheSameWriteLeavesNothingStale) {
    BinlogInvalidator follower(servers().mysql_options(), redis(), products_map(prefix_),
                               follower_options("inspected-" + prefix_));
    follower.start();
    ASSERT_TRUE(follower.wait_caught_up(10s));
    auto i = inspector(2s);  // generous: the follower's lag on a loaded machine stays far below it
    bypass_update();
    ASSERT_TRUE(eventually([&] { return i->metrics().checked == 1; }, 15s));
    auto m = i->metrics();
    EXPECT_EQ(m.stale, 0u);
    EXPECT_EQ(m.stale_per_million, 0.0);
}

TEST_F(InspectorTest, RefusesASampleRateOutsideZeroToOne) {
    InspectorOptions o;
    o.sample_rate = 0;
    EXPECT_THROW(ConsistencyInspector(servers().mysql_options(), redis(), products_map(prefix_), o), ConfigError);
    o.sample_rate = 1.5;
    EXPECT_THROW(ConsistencyInspector(servers().mysql_options(), redis(), products_map(prefix_), o), ConfigError);
}

}  // namespace
}  // namespace lockstep::test
