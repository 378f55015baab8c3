// SegmentedStock against the real redis-server (docs/races.md O3): takes move on when a segment is
// short, a take larger than any segment is split all-or-nothing, give-backs never create units,
// and under any interleaving no segment goes below zero and no more than the total is taken.
//
// Interleavings are forced with the "stock.before_take" fault point (after a take has chosen
// its segment, before its script runs); the free-running concurrent test asserts invariants that
// hold for every interleaving instead of relying on timing.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/locks/segmented_stock.h"
#include "test_servers.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;
using Units = std::vector<long long>;

// The hash tag Redis Cluster hashes a key by: the text between the first '{' and the first '}'
// after it, if that is not empty; otherwise the whole key.
std::string_view hash_tag(std::string_view key) {
    auto open = key.find('{');
    if (open == std::string_view::npos) return key;
    auto close = key.find('}', open + 1);
    if (close == std::string_view::npos || close == open + 1) return key;
    return key.substr(open + 1, close - open - 1);
}

// Always start at segment `s`.
std::function<int(int)> start_at(int s) {
    return [s](int) { return s; };
}

class SegmentedStockTest : public testing::Test {
protected:
    void SetUp() override {
        RedisOptions o = test::servers().redis_options();
        o.pool_size = 24;  // more than the threads of any test, so they really run at once
        redis_ = std::make_unique<RedisClient>(o);
        // unique_prefix() is "{t<pid>_<n>}:"; a prefix must carry no hash tag of its own.
        std::string unique = test::unique_prefix();
        unique.erase(
            std::remove_if(unique.begin(), unique.end(), [](char c) { return c == '{' || c == '}'; }),
            unique.end());
        prefix_ = "lstest:" + unique;
        delete_test_keys();
    }

    void TearDown() override { delete_test_keys(); }

    SegmentedStockOptions options(std::function<int(int)> choose = {}) const {
        SegmentedStockOptions o;
        o.prefix = prefix_;
        o.choose_segment = std::move(choose);
        return o;
    }

    // Every key under this test's prefix, found with SCAN (what a cluster operator would see).
    // SCAN reads one node: on a cluster, every node of the URL is scanned (a replica's copies
    // fold into the set).
    std::vector<std::string> test_keys() {
        std::set<std::string> keys;
        for (const RedisOptions& node : nodes_to_scan()) {
            RedisClient client(node);
            std::string cursor = "0";
            do {
                RedisReply r = client.command({"SCAN", cursor, "MATCH", prefix_ + "*", "COUNT", "1000"});
                cursor = r.elements().at(0).str();
                for (const auto& k : r.elements().at(1).elements()) keys.insert(k.str());
            } while (cursor != "0");
        }
        return {keys.begin(), keys.end()};
    }

    static std::vector<RedisOptions> nodes_to_scan() {
        const RedisOptions all = test::servers().redis_options();
        if (all.topology != RedisTopology::Cluster) return {all};
        std::vector<RedisOptions> nodes;
        for (const RedisEndpoint& e : all.nodes) {
            RedisOptions one = all;
            one.topology = RedisTopology::Standalone;
            one.nodes.clear();
            one.host = e.host;
            one.port = e.port;
            one.pool_size = 1;
            nodes.push_back(one);
        }
        return nodes;
    }

    void delete_test_keys() {
        for (const auto& k : test_keys()) redis_->del({k});
    }

    static Units segments_of(SegmentedStock& stock) { return stock.snapshot().segments; }

    std::unique_ptr<RedisClient> redis_;
    std::string prefix_;
};

TEST_F(SegmentedStockTest, InitSpreadsUnitsAndASecondInitChangesNothing) {
    SegmentedStock stock(*redis_, "sku", options());
    ASSERT_TRUE(stock.init(23, 5));
    StockSnapshot s = stock.snapshot();
    EXPECT_EQ(s.total, 23);
    EXPECT_EQ(s.segments, (Units{5, 5, 5, 4, 4}));
    EXPECT_EQ(stock.remaining(), 23);

    SegmentedStock other(*redis_, "sku", options());
    EXPECT_FALSE(other.init(10, 2));
    EXPECT_EQ(other.snapshot().segments, (Units{5, 5, 5, 4, 4}));
}

TEST_F(SegmentedStockTest, ConcurrentInitsCreateTheStockOnce) {
    std::atomic<int> created{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i) {
        threads.emplace_back([&, i] {
            SegmentedStock stock(*redis_, "sku", options());
            if (stock.init(100 + i, 4)) created.fetch_add(1);
        });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(created.load(), 1);
    SegmentedStock stock(*redis_, "sku", options());
    StockSnapshot s = stock.snapshot();
    EXPECT_EQ(s.remaining(), s.total);  // whichever won, its units were created exactly once
}

TEST_F(SegmentedStockTest, O3_TakeUsesTheChosenSegmentWhenItHoldsEnough) {
    SegmentedStock stock(*redis_, "sku", options(start_at(2)));
    ASSERT_TRUE(stock.init(20, 4));
    EXPECT_TRUE(stock.take(3));
    EXPECT_EQ(segments_of(stock), (Units{5, 5, 2, 5}));
}

TEST_F(SegmentedStockTest, O3_TakeMovesOnWhenASegmentIsShortAndWrapsAround) {
    SegmentedStock from0(*redis_, "sku", options(start_at(0)));
    SegmentedStock from2(*redis_, "sku", options(start_at(2)));
    ASSERT_TRUE(from0.init(12, 3));
    EXPECT_TRUE(from0.take(4));  // segment 0 holds exactly 4
    EXPECT_EQ(segments_of(from0), (Units{0, 4, 4}));
    EXPECT_TRUE(from0.take(3));  // 0 is empty: on to 1
    EXPECT_EQ(segments_of(from0), (Units{0, 1, 4}));
    EXPECT_TRUE(from0.take(2));  // 0 empty, 1 short: on to 2
    EXPECT_EQ(segments_of(from0), (Units{0, 1, 2}));
    EXPECT_TRUE(from2.take(2));
    EXPECT_EQ(segments_of(from0), (Units{0, 1, 0}));
    EXPECT_TRUE(from2.take(1));  // 2 empty, wraps to 0 (empty), then 1
    EXPECT_EQ(segments_of(from0), (Units{0, 0, 0}));
    EXPECT_FALSE(from2.take(1));
}

TEST_F(SegmentedStockTest, O3_TakeLargerThanAnySegmentIsSplitAllOrNothing) {
    SegmentedStock stock(*redis_, "sku", options(start_at(1)));
    ASSERT_TRUE(stock.init(10, 3));  // 4 3 3
    // No segment holds 7; together they do: taken across segments in visit order 1, 2, 0.
    EXPECT_TRUE(stock.take(7));
    EXPECT_EQ(segments_of(stock), (Units{3, 0, 0}));
    // 3 left in all: a take of 4 takes nothing, not 3.
    EXPECT_FALSE(stock.take(4));
    EXPECT_EQ(segments_of(stock), (Units{3, 0, 0}));
    EXPECT_TRUE(stock.take(3));
    EXPECT_FALSE(stock.take(1));
    EXPECT_EQ(segments_of(stock), (Units{0, 0, 0}));
}

TEST_F(SegmentedStockTest, O3_TakeOfMoreThanTheTotalTakesNothing) {
    SegmentedStock stock(*redis_, "sku", options());
    ASSERT_TRUE(stock.init(10, 2));
    EXPECT_FALSE(stock.take(11));
    EXPECT_FALSE(stock.take(1'000'000'000'000'000'000));
    EXPECT_EQ(segments_of(stock), (Units{5, 5}));
}

TEST_F(SegmentedStockTest, LargeCountsStayExact) {
    // Segments above 10^14 units: the split arithmetic must stay exact (Redis 6 and older would
    // turn such a Lua number into "2.6666666666667e+14" if a script passed it to a command).
    SegmentedStock stock(*redis_, "sku", options(start_at(0)));
    ASSERT_TRUE(stock.init(SegmentedStock::kMaxTotal, 3));
    EXPECT_TRUE(stock.take(400'000'000'000'001));  // split: all of segment 0, part of segment 1
    EXPECT_EQ(segments_of(stock), (Units{0, 266'666'666'666'666, 333'333'333'333'333}));
    stock.give_back(400'000'000'000'001);
    EXPECT_EQ(segments_of(stock), (Units{400'000'000'000'001, 266'666'666'666'666, 333'333'333'333'333}));
    EXPECT_EQ(stock.remaining(), SegmentedStock::kMaxTotal);
}

TEST_F(SegmentedStockTest, GiveBackRefillsTheEmptiestSegment) {
    SegmentedStock stock(*redis_, "sku", options(start_at(1)));
    ASSERT_TRUE(stock.init(9, 3));
    ASSERT_TRUE(stock.take(3));
    ASSERT_TRUE(stock.take(1));
    EXPECT_EQ(segments_of(stock), (Units{3, 0, 2}));  // the second take moved on from 1 to 2
    stock.give_back(2);
    EXPECT_EQ(segments_of(stock), (Units{3, 2, 2}));
    stock.give_back(2);  // segments 1 and 2 tie: the lower index gets the units
    EXPECT_EQ(segments_of(stock), (Units{3, 4, 2}));
}

TEST_F(SegmentedStockTest, GiveBackNeverCreatesUnits) {
    SegmentedStock stock(*redis_, "sku", options());
    ASSERT_TRUE(stock.init(10, 2));
    try {
        stock.give_back(1);  // nothing was taken
        FAIL() << "give_back created a unit";
    } catch (const ConfigError& e) {
        EXPECT_EQ(e.part(), "n");
    }
    ASSERT_TRUE(stock.take(3));
    EXPECT_THROW(stock.give_back(4), ConfigError);  // more back than was taken
    EXPECT_EQ(stock.remaining(), 7);                // and the refused call changed nothing
    stock.give_back(3);
    EXPECT_EQ(stock.remaining(), 10);
    EXPECT_THROW(stock.give_back(3), ConfigError);  // the same order compensated twice
    EXPECT_EQ(stock.remaining(), 10);
}

TEST_F(SegmentedStockTest, O3_ConcurrentGiveBacksStopAtTheTotal) {
    SegmentedStock stock(*redis_, "sku", options());
    ASSERT_TRUE(stock.init(10, 2));
    ASSERT_TRUE(stock.take(3));
    // Eight compensations for three units, released together: exactly three may land.
    fault::Barrier start(8, 10s);
    std::atomic<int> accepted{0};
    std::atomic<int> refused{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; ++i) {
        threads.emplace_back([&] {
            start.arrive_and_wait();
            try {
                stock.give_back(1);
                accepted.fetch_add(1);
            } catch (const ConfigError&) {
                refused.fetch_add(1);
            }
        });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(accepted.load(), 3);
    EXPECT_EQ(refused.load(), 5);
    EXPECT_EQ(stock.remaining(), 10);
}

TEST_F(SegmentedStockTest, O3_HeldTakesThatChoseTheSameSegmentMoveOnAndNeverOversell) {
    // Both units are in different segments; three orders all choose segment 0 and are held
    // there until all three have chosen. Released, they run in some order: two find a unit
    // (the second by moving on to segment 1), the third finds none. Never three.
    SegmentedStock stock(*redis_, "sku", options(start_at(0)));
    ASSERT_TRUE(stock.init(2, 2));
    fault::Gate gate(10s);
    auto armed = fault::arm("stock.before_take", gate.action());
    std::atomic<int> taken{0};
    std::atomic<int> refused{0};
    std::vector<std::thread> orders;
    for (int i = 0; i < 3; ++i) {
        orders.emplace_back([&] { (stock.take(1) ? taken : refused).fetch_add(1); });
    }
    ASSERT_TRUE(gate.wait_arrivals(3, 10s));
    EXPECT_EQ(segments_of(stock), (Units{1, 1}));  // all three decided on segment 0, none ran yet
    gate.open();
    for (auto& t : orders) t.join();
    EXPECT_EQ(taken.load(), 2);
    EXPECT_EQ(refused.load(), 1);
    EXPECT_EQ(segments_of(stock), (Units{0, 0}));
}

TEST_F(SegmentedStockTest, O3_SplitTakeHeldWhileAnotherOrderEmptiesASegmentTakesNothing) {
    SegmentedStock stock(*redis_, "sku", options(start_at(0)));
    ASSERT_TRUE(stock.init(4, 2));  // 2 2
    fault::Gate gate(10s);
    fault::ArmOptions first_only;
    first_only.times = 1;
    auto armed = fault::arm("stock.before_take", gate.action(), first_only);
    std::atomic<bool> big_order{true};
    std::thread a([&] { big_order = stock.take(3); });  // needs a split: no segment holds 3
    ASSERT_TRUE(gate.wait_arrivals(1, 10s));
    ASSERT_TRUE(stock.take(2));  // B passes the point (times = 1) and empties segment 0
    EXPECT_EQ(segments_of(stock), (Units{0, 2}));
    gate.open();
    a.join();
    // A needed 3 and only 2 are left: it took nothing, not the 2 it could find.
    EXPECT_FALSE(big_order.load());
    EXPECT_EQ(segments_of(stock), (Units{0, 2}));
}

TEST_F(SegmentedStockTest, O3_TwoSplitTakesForMoreThanHalfTheStockOnlyOneWins) {
    SegmentedStock stock(*redis_, "sku", options(start_at(0)));
    ASSERT_TRUE(stock.init(6, 3));  // 2 2 2
    fault::Gate gate(10s);
    auto armed = fault::arm("stock.before_take", gate.action());
    std::atomic<int> won{0};
    std::thread a([&] { won.fetch_add(stock.take(4) ? 1 : 0); });
    std::thread b([&] { won.fetch_add(stock.take(4) ? 1 : 0); });
    ASSERT_TRUE(gate.wait_arrivals(2, 10s));
    gate.open();
    a.join();
    b.join();
    EXPECT_EQ(won.load(), 1);
    EXPECT_EQ(stock.remaining(), 2);
}

TEST_F(SegmentedStockTest, O3_SixteenThreadsDrainTwoHundredUnitsExactly) {
    constexpr long long kTotal = 200;
    constexpr int kSegments = 10;
    constexpr int kThreads = 16;
    SegmentedStock setup(*redis_, "hot-item", options());
    ASSERT_TRUE(setup.init(kTotal, kSegments));

    std::atomic<int> finished{0};
    std::atomic<long long> taken{0};
    std::vector<long long> taken_by(kThreads, 0);
    std::vector<int> refused_by(kThreads, 0);
    // Every order asks for 1-4 units and, when refused, tries again with a new size; a refused
    // take of 1 means the item is sold out. Each thread has its own SegmentedStock, as separate
    // processes would.
    fault::Barrier start(kThreads, 10s);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            SegmentedStock stock(*redis_, "hot-item", options());
            std::mt19937 rng(static_cast<unsigned>(t));
            start.arrive_and_wait();
            for (;;) {
                long long n = std::uniform_int_distribution<long long>(1, 4)(rng);
                if (stock.take(n)) {
                    taken_by[static_cast<std::size_t>(t)] += n;
                    taken.fetch_add(n);
                } else if (n == 1) {
                    break;
                } else {
                    ++refused_by[static_cast<std::size_t>(t)];
                }
            }
            finished.fetch_add(1);
        });
    }
    // While the orders run, every snapshot (one atomic read of all segments) must satisfy the
    // invariants, whatever the interleaving. Violations are counted, not ASSERTed, so the
    // threads are always joined.
    long long snapshots = 0;
    long long below_zero = 0;
    long long grew = 0;
    long long last_remaining = kTotal;
    while (finished.load() < kThreads) {
        StockSnapshot s = setup.snapshot();
        ++snapshots;
        below_zero += std::count_if(s.segments.begin(), s.segments.end(), [](long long u) { return u < 0; });
        if (s.remaining() > last_remaining) ++grew;
        last_remaining = s.remaining();
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(below_zero, 0) << "a segment went below zero";
    EXPECT_EQ(grew, 0) << "units appeared from nowhere (there are no give-backs here)";

    // Exactly the total was taken: no oversell, and no take that failed (or succeeded) moved a
    // different number of units than it reported.
    EXPECT_EQ(taken.load(), kTotal);
    EXPECT_EQ(std::accumulate(taken_by.begin(), taken_by.end(), 0LL), kTotal);
    EXPECT_EQ(segments_of(setup), Units(kSegments, 0));
    EXPECT_GT(snapshots, 0);
    RecordProperty("snapshots", static_cast<int>(snapshots));
    RecordProperty("refused_takes", std::accumulate(refused_by.begin(), refused_by.end(), 0));
}

TEST_F(SegmentedStockTest, EveryKeyCarriesTheItemsHashTag) {
    SegmentedStock stock(*redis_, "sku:7", options(start_at(3)));
    ASSERT_TRUE(stock.init(50, 8));
    ASSERT_TRUE(stock.take(9));  // a split: touches several segments
    stock.give_back(2);
    (void)stock.snapshot();

    std::vector<std::string> expected{stock.meta_key()};
    for (int i = 0; i < 8; ++i) expected.push_back(stock.segment_key(i));
    for (const auto& key : expected) {
        EXPECT_EQ(hash_tag(key), "stock:sku:7") << key;
        EXPECT_EQ(key.rfind(prefix_, 0), 0u) << key;
    }
    // What is really stored is exactly those keys, nothing else.
    std::sort(expected.begin(), expected.end());
    std::vector<std::string> stored = test_keys();
    EXPECT_EQ(stored, expected);
    for (const auto& key : stored) EXPECT_EQ(hash_tag(key), "stock:sku:7") << key;
}

TEST_F(SegmentedStockTest, AnItemWithoutStockIsAnError) {
    SegmentedStock stock(*redis_, "never-initialised", options());
    for (auto call : std::vector<std::function<void()>>{
             [&] { (void)stock.take(1); }, [&] { stock.give_back(1); }, [&] { (void)stock.remaining(); }}) {
        try {
            call();
            ADD_FAILURE() << "no error for an item without stock";
        } catch (const ConfigError& e) {
            EXPECT_EQ(e.part(), "item");
        }
    }
    EXPECT_FALSE(stock.destroy());
    EXPECT_TRUE(test_keys().empty());  // and nothing was created by asking
}

TEST_F(SegmentedStockTest, DestroyRemovesEveryKeyAndAllowsANewStock) {
    SegmentedStock stock(*redis_, "sku", options());
    ASSERT_TRUE(stock.init(10, 5));
    EXPECT_TRUE(stock.destroy());
    EXPECT_TRUE(test_keys().empty());
    EXPECT_FALSE(stock.destroy());
    ASSERT_TRUE(stock.init(6, 2));
    EXPECT_EQ(segments_of(stock), (Units{3, 3}));
}

TEST_F(SegmentedStockTest, AnObjectWithAStaleLayoutFollowsTheNewOne) {
    SegmentedStock old_view(*redis_, "sku", options(start_at(1)));
    ASSERT_TRUE(old_view.init(10, 2));  // old_view now caches 2 segments
    SegmentedStock other(*redis_, "sku", options());
    ASSERT_TRUE(other.destroy());
    ASSERT_TRUE(other.init(9, 3));
    EXPECT_TRUE(old_view.take(1));  // must use the 3-segment layout, not segments 0-1 of the old
    EXPECT_EQ(segments_of(old_view), (Units{3, 2, 3}));
    EXPECT_EQ(test_keys().size(), 4u);
}

TEST_F(SegmentedStockTest, AChosenSegmentOutOfRangeIsRefused) {
    SegmentedStock stock(*redis_, "sku", options(start_at(5)));
    ASSERT_TRUE(stock.init(10, 5));
    try {
        (void)stock.take(1);
        FAIL() << "accepted segment 5 of 5";
    } catch (const ConfigError& e) {
        EXPECT_EQ(e.part(), "choose_segment");
    }
    EXPECT_EQ(stock.remaining(), 10);
}

}  // namespace
}  // namespace lockstep
