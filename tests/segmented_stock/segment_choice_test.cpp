// Unit level, no server: how init spreads units over segments, how a take picks its first
// segment, and which arguments are refused before any I/O.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"
#include "lockstep/locks/segmented_stock.h"

namespace lockstep {
namespace {

using Shares = std::vector<long long>;

void expect_config_error(const std::function<void()>& f, const std::string& part) {
    try {
        f();
        ADD_FAILURE() << "no ConfigError (expected part '" << part << "')";
    } catch (const ConfigError& e) {
        EXPECT_EQ(e.part(), part) << e.what();
    }
}

TEST(InitialShares, SpreadEvenlyWithTheRemainderToTheFirstSegments) {
    EXPECT_EQ(SegmentedStock::initial_shares(200, 10), Shares(10, 20));
    EXPECT_EQ(SegmentedStock::initial_shares(23, 5), (Shares{5, 5, 5, 4, 4}));
    EXPECT_EQ(SegmentedStock::initial_shares(10, 3), (Shares{4, 3, 3}));
    EXPECT_EQ(SegmentedStock::initial_shares(1, 1), Shares{1});
    EXPECT_EQ(SegmentedStock::initial_shares(7, 7), Shares(7, 1));
    EXPECT_EQ(SegmentedStock::initial_shares(SegmentedStock::kMaxTotal, 3),
              (Shares{333'333'333'333'334, 333'333'333'333'333, 333'333'333'333'333}));
}

TEST(InitialShares, AlwaysSumToTheTotalAndDifferByAtMostOne) {
    for (long long total : {1LL, 2LL, 9LL, 10LL, 11LL, 199LL, 200LL, 201LL, 1'000'003LL}) {
        for (int segments = 1; segments <= std::min<long long>(total, 37); ++segments) {
            Shares s = SegmentedStock::initial_shares(total, segments);
            ASSERT_EQ(s.size(), static_cast<std::size_t>(segments));
            EXPECT_EQ(std::accumulate(s.begin(), s.end(), 0LL), total) << total << "/" << segments;
            EXPECT_LE(s.front() - s.back(), 1);
            EXPECT_TRUE(std::is_sorted(s.rbegin(), s.rend()));  // the larger shares come first
            EXPECT_GE(s.back(), 1);                             // no segment starts empty
        }
    }
}

TEST(InitialShares, RefusesBadInput) {
    expect_config_error([] { SegmentedStock::initial_shares(0, 1); }, "total");
    expect_config_error([] { SegmentedStock::initial_shares(-5, 1); }, "total");
    expect_config_error([] { SegmentedStock::initial_shares(SegmentedStock::kMaxTotal + 1, 1); }, "total");
    expect_config_error([] { SegmentedStock::initial_shares(10, 0); }, "segments");
    expect_config_error([] { SegmentedStock::initial_shares(10, -2); }, "segments");
    expect_config_error([] { SegmentedStock::initial_shares(10, 11); }, "segments");
}

TEST(RandomSegment, StaysInRangeAndReachesEverySegment) {
    EXPECT_EQ(SegmentedStock::random_segment(1), 0);
    std::set<int> seen;
    for (int i = 0; i < 10'000; ++i) {
        int s = SegmentedStock::random_segment(10);
        ASSERT_GE(s, 0);
        ASSERT_LT(s, 10);
        seen.insert(s);
    }
    // With 10,000 uniform draws the chance that one of 10 segments is never drawn is ~1e-457.
    EXPECT_EQ(seen.size(), 10u);
    expect_config_error([] { SegmentedStock::random_segment(0); }, "segments");
}

// Nothing below reaches a server: the client points at a port nobody listens on, so an
// accidental round trip would show up as a ConnectionError instead of the ConfigError.
class StockArguments : public testing::Test {
protected:
    static RedisOptions unreachable() {
        RedisOptions o;
        o.port = 1;
        o.connect_timeout = std::chrono::milliseconds(200);
        return o;
    }
    RedisClient redis_{unreachable()};
};

TEST_F(StockArguments, ItemAndPrefixMustKeepTheHashTagIntact) {
    expect_config_error([&] { SegmentedStock(redis_, ""); }, "item");
    expect_config_error([&] { SegmentedStock(redis_, "sku{1}"); }, "item");
    expect_config_error([&] { SegmentedStock(redis_, "sku}"); }, "item");
    SegmentedStockOptions tagged;
    tagged.prefix = "{app}:";
    expect_config_error([&] { SegmentedStock(redis_, "sku", tagged); }, "prefix");
    SegmentedStockOptions none;
    none.max_segments = 0;
    expect_config_error([&] { SegmentedStock(redis_, "sku", none); }, "max_segments");
}

TEST_F(StockArguments, InitRefusesBadTotalsAndSegmentCounts) {
    SegmentedStockOptions options;
    options.max_segments = 4;
    SegmentedStock stock(redis_, "sku", options);
    expect_config_error([&] { (void)stock.init(0, 1); }, "total");
    expect_config_error([&] { (void)stock.init(-1, 1); }, "total");
    expect_config_error([&] { (void)stock.init(SegmentedStock::kMaxTotal + 1, 2); }, "total");
    expect_config_error([&] { (void)stock.init(10, 0); }, "segments");
    expect_config_error([&] { (void)stock.init(3, 4); }, "segments");    // a segment would start empty
    expect_config_error([&] { (void)stock.init(100, 5); }, "segments");  // above max_segments
}

TEST_F(StockArguments, TakeAndGiveBackNeedAPositiveCount) {
    SegmentedStock stock(redis_, "sku");
    expect_config_error([&] { (void)stock.take(0); }, "n");
    expect_config_error([&] { (void)stock.take(-3); }, "n");
    expect_config_error([&] { stock.give_back(0); }, "n");
    expect_config_error([&] { stock.give_back(-1); }, "n");
    expect_config_error([&] { stock.give_back(SegmentedStock::kMaxTotal + 1); }, "n");
    expect_config_error([&] { (void)stock.segment_key(-1); }, "segment");
}

TEST_F(StockArguments, KeysFollowTheDocumentedLayout) {
    SegmentedStock stock(redis_, "sku-42");
    EXPECT_EQ(stock.meta_key(), "ls:{stock:sku-42}:meta");
    EXPECT_EQ(stock.segment_key(0), "ls:{stock:sku-42}:seg:0");
    EXPECT_EQ(stock.segment_key(17), "ls:{stock:sku-42}:seg:17");
    SegmentedStockOptions options;
    options.prefix = "shop:";
    EXPECT_EQ(SegmentedStock(redis_, "a:b", options).segment_key(3), "shop:{stock:a:b}:seg:3");
}

}  // namespace
}  // namespace lockstep
