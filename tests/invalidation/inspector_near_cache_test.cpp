// The consistency inspector judging a near cache's local entries (watch_near_cache), against the
// private servers. An outside UPDATE goes through the binlog and the follower deletes the Redis
// key; Redis's tracking message then removes the local entry, and the inspector counts it fresh.
// With the near cache's invalidation path broken — its subscriber killed (CLIENT KILL) and its
// resubscription held at "near.before_subscribe", the drop rule off (C12 reopened) — the message
// is lost: the Redis entry is gone (fresh) while the local one still holds the old version, and
// the inspector counts it stale until it goes.
//
// Every inspector check is held at "invalidation.before_inspector_check" until the follower has
// applied the write and the channel has delivered what it was sent: no check races the follower.
#include <chrono>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "invalidation_test_support.h"
#include "lockstep/cache/redis_near_cache.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/invalidation/consistency_inspector.h"
#include "lockstep/invalidation/fault_points.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

class InspectorNearCacheTest : public ::testing::Test {
protected:
    void SetUp() override {
        LOCKSTEP_REQUIRE_STANDALONE_REDIS("CLIENT TRACKING and CLIENT KILL are per node");
        prefix_ = fresh_prefix();
        id_ = fresh_id();
        db().execute("INSERT INTO products (id, name, price, stock, version) VALUES (?, 'n', 100, 5, 1)", {id_});
    }
    void TearDown() override { db().execute("DELETE FROM products WHERE id = ?", {id_}); }

    void make_near(bool drop_rule) {
        NearCacheOptions n;
        n.ttl = 60s;
        n.drop_rule = drop_rule;
        near_ = std::make_shared<RedisNearCache>(servers().redis_options(), n);
        RepositoryOptions o;
        o.key_prefix = prefix_;
        o.ttl = 60s;
        o.near_cache = near_;
        repo_ = std::make_unique<CachedRepository<Item>>(item_entity(), db(), redis(), o);
        key_ = repo_->key_of(id_);
    }
    // Reads the row until the near cache holds it, every invalidation sent before applied (a
    // read's local fill may rightly be refused by the announcement of its own miss's Redis fill).
    void hold_locally() {
        ASSERT_TRUE(eventually([&] {
            repo_->get(id_);
            sync_channel();
            return near_->local().stats().entries == 1;
        })) << near_->local().stats().entries;
    }
    // A message of our own on the invalidation channel, waited for: Redis delivers in order.
    void sync_channel() {
        const auto before = near_->channel().messages();
        redis().command({"PUBLISH", "__redis__:invalidate", prefix_ + "sync"});
        ASSERT_TRUE(eventually([&] { return near_->channel().messages() > before; }, 10s));
    }
    std::unique_ptr<ConsistencyInspector> inspector() {
        InspectorOptions o;
        o.server_id = fresh_server_id();
        o.check_after = 100ms;
        o.recheck_every = 20ms;
        o.heartbeat = 100ms;
        auto i = std::make_unique<ConsistencyInspector>(servers().mysql_options(), redis(), products_map(prefix_), o);
        i->watch_near_cache("product", prefix_, near_);
        i->start();
        EXPECT_TRUE(i->wait_connected(10s));
        return i;
    }
    void outside_update() {
        db().execute("UPDATE products SET price = 200, version = version + 1 WHERE id = ?", {id_});
    }

    std::string prefix_, key_;
    std::int64_t id_ = 0;
    std::shared_ptr<RedisNearCache> near_;
    std::unique_ptr<CachedRepository<Item>> repo_;
};

TEST_F(InspectorNearCacheTest, AnOutsideUpdateInvalidatesTheLocalEntryWhichIsCountedFresh) {
    make_near(/*drop_rule=*/true);
    hold_locally();
    BinlogInvalidator follower(servers().mysql_options(), redis(), products_map(prefix_),
                               follower_options("near-inspected-" + prefix_));
    follower.start();
    ASSERT_TRUE(follower.wait_caught_up(10s));
    auto i = inspector();

    fault::Gate check;
    auto armed = fault::arm(std::string(invalidation_points::before_inspector_check), check.action());
    outside_update();
    ASSERT_TRUE(check.wait_arrivals(1, 10s)) << "the inspector did not sample the write";
    ASSERT_TRUE(follower.wait_caught_up(10s));
    sync_channel();
    check.open();

    ASSERT_TRUE(eventually([&] {
        const auto m = i->metrics();
        return m.checked == 1 && m.near_cache.checked == 1;
    }, 10s));
    const auto m = i->metrics();
    EXPECT_EQ(m.near_cache.rows_seen, 1u);
    EXPECT_EQ(m.near_cache.stale, 0u);
    EXPECT_EQ(m.near_cache.stale_per_million, 0.0);
    EXPECT_EQ(m.stale, 0u);
    EXPECT_EQ(near_->local().stats().entries, 0u) << "fresh because the tracking message removed it";
    EXPECT_EQ(repo_->get(id_)->price, 200);
}

TEST_F(InspectorNearCacheTest, ALostInvalidationLeavesTheLocalEntryStaleUntilItGoes) {
    make_near(/*drop_rule=*/false);  // C12 reopened: the broken channel does not drop the entry
    hold_locally();
    BinlogInvalidator follower(servers().mysql_options(), redis(), products_map(prefix_),
                               follower_options("near-lost-" + prefix_));
    follower.start();
    ASSERT_TRUE(follower.wait_caught_up(10s));
    auto i = inspector();
    const auto hits_before = near_->local().stats().hits;

    // The near cache's channel is down while the follower deletes the key: its message is lost.
    fault::Gate resubscribe;
    auto sub_armed = fault::arm("near.before_subscribe", resubscribe.action());
    const auto subscriber = near_->channel().subscriber_id();
    ASSERT_NE(subscriber, 0);
    ASSERT_EQ(redis().command({"CLIENT", "KILL", "ID", std::to_string(subscriber)}).integer(), 1);
    ASSERT_TRUE(resubscribe.wait_arrivals(1, 10s)) << "the subscriber did not try to reconnect";

    fault::Gate check;
    auto armed = fault::arm(std::string(invalidation_points::before_inspector_check), check.action());
    outside_update();
    ASSERT_TRUE(check.wait_arrivals(1, 10s)) << "the inspector did not sample the write";
    ASSERT_TRUE(follower.wait_caught_up(10s));
    check.open();

    ASSERT_TRUE(eventually([&] { return i->metrics().near_cache.stale == 1; }, 10s))
        << "near checked " << i->metrics().near_cache.checked;
    auto m = i->metrics();
    EXPECT_EQ(m.stale, 0u) << "the Redis entry is fresh: the follower deleted it";
    EXPECT_EQ(m.checked, 1u);
    EXPECT_EQ(m.near_cache.checked, 1u);
    EXPECT_EQ(m.near_cache.stale_open, 1u);
    EXPECT_EQ(m.near_cache.stale_per_million, 1e6);
    EXPECT_EQ(near_->local().peek(key_)->version, 1) << "the old version is still held";
    EXPECT_EQ(near_->local().stats().hits, hits_before) << "the inspector's look is not a hit";

    resubscribe.open();
    ASSERT_TRUE(eventually([&] { return near_->channel().intact() && near_->channel().connects() == 2; }, 10s));
    EXPECT_EQ(i->metrics().near_cache.stale_open, 1u) << "a resubscription without the drop rule keeps it";
    // The entry goes (here by hand; the local TTL or a later invalidation of the key would do it).
    near_->local().invalidate(key_);
    ASSERT_TRUE(eventually([&] { return i->metrics().near_cache.stale_open == 0; }, 10s));
    m = i->metrics();
    EXPECT_GE(m.near_cache.staleness_p50_ms, 100.0) << "stale from the write until it went, at least check_after";
    EXPECT_EQ(m.near_cache.stale_given_up, 0u);
    EXPECT_EQ(m.staleness_p50_ms, 0.0) << "the Redis entry was never stale";
}

TEST_F(InspectorNearCacheTest, RefusesANearCacheOfAnEntityTheMapDoesNotBind) {
    make_near(/*drop_rule=*/true);
    ConsistencyInspector i(servers().mysql_options(), redis(), products_map(prefix_), {.server_id = fresh_server_id()});
    EXPECT_THROW(i.watch_near_cache("order", prefix_, near_), ConfigError);
    EXPECT_THROW(i.watch_near_cache("product", "other:", near_), ConfigError);
    EXPECT_THROW(i.watch_near_cache("product", prefix_, std::shared_ptr<RedisNearCache>()), ConfigError);
}

}  // namespace
}  // namespace lockstep::test
