// NearCache on its own (no server): its bounds, its versions, and the ticket rule that refuses a
// fill whose read began before a drop or before an invalidation of its key (C12).
#include <thread>

#include <gtest/gtest.h>

#include "lockstep/cache/near_cache.h"
#include "lockstep/core/error.h"
#include "lockstep/strategies/repository_metrics.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;

bool put(NearCache& near, const std::string& key, std::int64_t version, std::string bytes) {
    const auto ticket = near.begin_fill(key);
    return near.fill(key, ticket, version, std::move(bytes));
}

TEST(NearCacheStoreTest, TheLeastRecentlyUsedEntryGoesFirstWhenTheEntryBoundIsReached) {
    NearCache near({.max_entries = 2});
    ASSERT_TRUE(put(near, "a", 1, "A"));
    ASSERT_TRUE(put(near, "b", 1, "B"));
    ASSERT_TRUE(near.get("a"));  // "b" is now the least recently used
    ASSERT_TRUE(put(near, "c", 1, "C"));
    EXPECT_TRUE(near.get("a"));
    EXPECT_FALSE(near.get("b"));
    EXPECT_TRUE(near.get("c"));
    EXPECT_EQ(near.stats().entries, 2u);
    EXPECT_EQ(near.stats().evictions, 1u);
}

TEST(NearCacheStoreTest, TheByteBoundCountsKeysPayloadsAndOverhead) {
    const std::size_t one = 1 + 100 + NearCache::kEntryOverhead;
    NearCache near({.max_bytes = 2 * one});
    ASSERT_TRUE(put(near, "a", 1, std::string(100, 'x')));
    ASSERT_TRUE(put(near, "b", 1, std::string(100, 'x')));
    EXPECT_EQ(near.stats().bytes, 2 * one);
    ASSERT_TRUE(put(near, "c", 1, std::string(100, 'x')));
    EXPECT_EQ(near.stats().entries, 2u);
    EXPECT_FALSE(near.get("a"));
    EXPECT_FALSE(put(near, "big", 1, std::string(3 * one, 'x'))) << "an entry larger than the bound is not kept";
}

TEST(NearCacheStoreTest, AFillNeverReplacesANewerLocalVersion) {
    NearCache near;
    ASSERT_TRUE(put(near, "k", 5, "v5"));
    EXPECT_FALSE(put(near, "k", 4, "v4"));
    EXPECT_EQ(near.get("k")->bytes, "v5");
    EXPECT_TRUE(put(near, "k", 6, "v6"));
    EXPECT_EQ(near.get("k")->version, 6);
}

TEST(NearCacheStoreTest, APeekIsNeitherAHitNorAMissAndLeavesTheLruOrderAlone) {
    NearCache near({.max_entries = 2});
    ASSERT_TRUE(put(near, "a", 1, "A"));
    ASSERT_TRUE(put(near, "b", 2, "B"));
    EXPECT_EQ(near.peek("a")->version, 1);  // "a" stays the least recently used
    EXPECT_FALSE(near.peek("z"));
    EXPECT_EQ(near.stats().hits, 0u);
    EXPECT_EQ(near.stats().misses, 0u);
    ASSERT_TRUE(put(near, "c", 1, "C"));
    EXPECT_FALSE(near.peek("a")) << "evicted: the peek did not make it recent";
    EXPECT_EQ(near.peek("b")->bytes, "B");
}

TEST(NearCacheStoreTest, AFillFromAReadThatBeganBeforeADropIsRefused) {
    NearCache near;
    const auto ticket = near.begin_fill("k");
    near.drop("test");
    EXPECT_FALSE(near.fill("k", ticket, 1, "v1"));
    EXPECT_FALSE(near.get("k"));
    EXPECT_EQ(near.stats().fills_refused, 1u);
}

TEST(NearCacheStoreTest, AFillFromAReadThatBeganBeforeItsKeysInvalidationIsRefused) {
    NearCache near;
    const auto ticket = near.begin_fill("k");
    near.invalidate("k");
    EXPECT_FALSE(near.fill("k", ticket, 1, "v1"));
    const auto other = near.begin_fill("other");
    near.invalidate("k");
    EXPECT_TRUE(near.fill("other", other, 1, "v1")) << "another key's invalidation does not matter";
}

TEST(NearCacheStoreTest, WithoutTheDropRuleADropKeepsEntriesAndOldReadsFill) {
    NearCache near({.drop_rule = false});
    ASSERT_TRUE(put(near, "a", 1, "A"));
    const auto ticket = near.begin_fill("k");
    near.drop("test");
    EXPECT_TRUE(near.get("a"));
    EXPECT_TRUE(near.fill("k", ticket, 1, "v1"));
}

TEST(NearCacheStoreTest, AnEntryPastItsLocalTtlIsAMiss) {
    NearCache near({.ttl = 1ms});
    ASSERT_TRUE(put(near, "k", 1, "v"));
    std::this_thread::sleep_for(5ms);  // the TTL itself is what is tested: a clock must pass it
    EXPECT_FALSE(near.get("k"));
    EXPECT_EQ(near.stats().entries, 0u);
}

TEST(NearCacheStoreTest, BoundsOfZeroAreRefused) {
    EXPECT_THROW(NearCache({.max_entries = 0}), ConfigError);
    EXPECT_THROW(NearCache({.max_bytes = 0}), ConfigError);
    EXPECT_THROW(NearCache({.ttl = 0ms}), ConfigError);
}

TEST(NearCacheStoreTest, ItsEntriesAndBytesAreGaugesOfTheRepositoryMetrics) {
    EXPECT_EQ(metric_kind("near_entries"), MetricKind::Gauge);
    EXPECT_EQ(metric_kind("near_bytes"), MetricKind::Gauge);
    EXPECT_EQ(metric_kind("near_hits"), MetricKind::Counter);
    RepositoryMetrics m;
    m.near_drops = 7;
    EXPECT_NE(to_string(m).find("near_drops=7"), std::string::npos) << to_string(m);
}

}  // namespace
}  // namespace lockstep
