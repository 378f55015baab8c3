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

// The mixed workload: 200 writes over 20 keys, every key read (so cached) before each
// write; 10% of the writes bypass the library (plain UPDATEs of two keys the library never
// writes, so nothing else repairs them). Without a follower each bypassing write leaves a stale
// entry; with one, none does. Exact counts: every interleaving here is sequential.
struct MixedLoad {
    InspectorMetrics metrics;
    int bypassing = 0;
};

MixedLoad mixed_load(CachedRepository<Item>& repo, ConsistencyInspector& inspector, std::int64_t first_id) {
    constexpr int kKeys = 20, kWrites = 200;
    const auto before = inspector.metrics().checked;
    for (int k = 0; k < kKeys; ++k) repo.insert(Item{first_id + k, "mixed", 100, 5});
    MixedLoad out;
    for (int n = 0; n < kWrites; ++n) {
        const std::int64_t id = first_id + n % kKeys;
        repo.get(id);  // cached before the write
        if (n % kKeys < 2) {
            db().execute("UPDATE products SET price = price + 1, version = version + 1 WHERE id = ?", {id});
            ++out.bypassing;
        } else {
            repo.update(id, [](Item& p) { p.price += 1; });
        }
    }
    // Every write and every insert checked (each is a change of a watched row).
    EXPECT_TRUE(eventually([&] { return inspector.metrics().checked >= before + kKeys + kWrites; }, 30s))
        << inspector.metrics().checked - before;
    out.metrics = inspector.metrics();
    for (int k = 0; k < kKeys; ++k) db().execute("DELETE FROM products WHERE id = ?", {first_id + k});
    return out;
}

TEST_F(InspectorTest, UnderAMixedLoadTheBypassingTenPercentAreStaleWithoutTheFollowerAndNoneWithIt) {
    MixedLoad without;
    {
        auto i = inspector(50ms);
        without = mixed_load(*repo_, *i, fresh_id() * 100);
    }
    BinlogInvalidator follower(servers().mysql_options(), redis(), products_map(prefix_),
                               follower_options("mixed-" + prefix_));
    follower.start();
    ASSERT_TRUE(follower.wait_caught_up(10s));
    MixedLoad with;
    {
        auto i = inspector(2s);
        with = mixed_load(*repo_, *i, fresh_id() * 100);
    }
    EXPECT_EQ(without.metrics.stale, static_cast<std::uint64_t>(without.bypassing));
    EXPECT_EQ(with.metrics.stale, 0u);
    std::printf("mixed load, 200 writes, %d bypassing: without the follower %llu stale (%.0f per million checked); "
                "with it %llu stale; follower lag p50 %.0f us p99 %.0f us\n",
                without.bypassing, static_cast<unsigned long long>(without.metrics.stale),
                without.metrics.stale_per_million, static_cast<unsigned long long>(with.metrics.stale),
                follower.metrics().lag_p50_us, follower.metrics().lag_p99_us);
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
