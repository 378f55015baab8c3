// The cache-entry envelope, entity keys, TtlBounding's caps and the background scheduler:
// logic only, no servers.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "lockstep/core/error.h"
#include "lockstep/strategies/strategies.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;

struct Counted {
    std::int64_t id = 0;
    double weight = 0;
};
void to_json(nlohmann::json& j, const Counted& c) { j = {{"id", c.id}, {"weight", c.weight}}; }
void from_json(const nlohmann::json& j, Counted& c) {
    j.at("id").get_to(c.id);
    j.at("weight").get_to(c.weight);
}

// Found by tests/fuzz/fuzz_cache_entry: an integer literal beyond 64 bits was cast from a double
// (undefined behaviour); it is a corrupt entry, refused like any undecodable one.
TEST(JsonCodecTest, AnIntegerBeyond64BitsIsRefusedNotCast) {
    const JsonCodec<Counted> codec;
    EXPECT_THROW(codec.decode(R"({"id":-17777777777777777777777,"weight":1})"), std::out_of_range);
    EXPECT_THROW(codec.decode(R"({"id":18446744073709551616,"weight":1})"), std::out_of_range);
    EXPECT_EQ(codec.decode(R"({"id":-9223372036854775808,"weight":1e22})").id, INT64_MIN);
    EXPECT_EQ(codec.decode(R"({"weight":2.5e300,"id":18446744073709551615})").weight, 2.5e300);
}

// Found by tests/fuzz/fuzz_cache_entry: a float with a fraction, far beyond int64,
// in an integer field was cast (undefined behaviour). A float where T keeps an integer is refused
// when it is out of int32's range; a double field keeps any value.
TEST(JsonCodecTest, AFloatOutOfRangeForAnIntegerFieldIsRefusedNotCast) {
    const JsonCodec<Counted> codec;
    EXPECT_THROW(codec.decode(R"({"id":-13377700045030141000749507.039908014829,"weight":1})"), std::out_of_range);
    EXPECT_THROW(codec.decode(R"({"id":3e9,"weight":1})"), std::out_of_range);
    EXPECT_THROW(codec.decode(R"({"id":1e300,"weight":1e300})"), std::out_of_range);
    EXPECT_EQ(codec.decode(R"({"id":7,"weight":-1e22})").weight, -1e22);
    EXPECT_EQ(codec.decode(R"({"id":2.9,"weight":0.5})").id, 2);  // in range: truncated, defined
    // Nested and repeated: every place is checked.
    const JsonCodec<std::vector<Counted>> many;
    EXPECT_THROW(many.decode(R"([{"id":1,"weight":1e30},{"id":1e30,"weight":1}])"), std::out_of_range);
    EXPECT_EQ(many.decode(R"([{"id":1,"weight":1e30},{"id":2,"weight":1}])").at(0).weight, 1e30);
}

TEST(CacheEntryTest, ValueRoundTripsWithBinaryPayload) {
    const std::string payload("a\0b:c\xff", 6);
    auto bytes = CacheEntry::encode_value(42, payload);
    EXPECT_EQ(bytes.substr(0, 4), "v42:");
    auto e = CacheEntry::decode(bytes);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->kind, CacheEntry::Kind::Value);
    EXPECT_EQ(e->version, 42);
    EXPECT_EQ(e->payload, payload);
}

TEST(CacheEntryTest, EmptyPayloadAndVersionZeroAreValid) {
    auto e = CacheEntry::decode(CacheEntry::encode_value(0, ""));
    ASSERT_TRUE(e);
    EXPECT_EQ(e->version, 0);
    EXPECT_EQ(e->payload, "");
}

TEST(CacheEntryTest, NotFoundAndMarkerDecode) {
    auto n = CacheEntry::decode(CacheEntry::encode_not_found());
    ASSERT_TRUE(n);
    EXPECT_EQ(n->kind, CacheEntry::Kind::NotFound);
    auto m = CacheEntry::decode(CacheEntry::encode_marker("abc"));
    ASSERT_TRUE(m);
    EXPECT_EQ(m->kind, CacheEntry::Kind::Marker);
    EXPECT_EQ(m->payload, "abc");
}

TEST(CacheEntryTest, AnythingElseDoesNotDecode) {
    for (std::string bad : {"", "v", "v:", "vx:1", "v01:x", "v-1:x", "v12", "n:x", "n", "L:", "L", "x:1",
                            "{\"id\":1}", "v99999999999999999999:x"}) {
        EXPECT_FALSE(CacheEntry::decode(bad)) << "'" << bad << "'";
    }
}

TEST(EntityKeysTest, EveryKeyOfAnIdSharesTheEntityHashTag) {
    EntityKeys keys("ls:", "product");
    EXPECT_EQ(keys.value(42), "ls:{product:42}");
    EXPECT_EQ(keys.lock_name(42), "product:42");
    EXPECT_EQ(redis_hash_tag(keys.value(42)), "product:42");
    EXPECT_EQ(redis_hash_tag("ls:{product:42}:lock"), "product:42");
    EXPECT_EQ(redis_hash_tag("plain"), "plain");
    EXPECT_EQ(redis_hash_tag("a{}b"), "a{}b");
}

TEST(EntityKeysTest, BracesInThePrefixOrNameAreRefused) {
    EXPECT_THROW(EntityKeys("{t1}:", "product"), ConfigError);
    EXPECT_THROW(EntityKeys("ls:", "pro{duct"), ConfigError);
    EXPECT_THROW(EntityKeys("ls:", ""), ConfigError);
    EXPECT_THROW(EntityKeys("ls:", "a b"), ConfigError);
}

TEST(TtlBoundingTest, CapsEveryTtlAtMaxMinusJitter) {
    TtlBounding bound(1000ms, 200ms);
    std::set<long long> seen;
    for (int i = 0; i < 200; ++i) {
        auto ttl = bound.entry_ttl(std::chrono::minutes(10));
        EXPECT_LE(ttl, 1000ms);
        EXPECT_GE(ttl, 800ms);
        seen.insert(ttl.count());
    }
    EXPECT_GT(seen.size(), 10u) << "jitter spreads expiries";
    EXPECT_EQ(bound.entry_ttl(100ms), 100ms) << "a shorter TTL is kept";
    EXPECT_THROW(TtlBounding(0ms), ConfigError);
    EXPECT_THROW(TtlBounding(100ms, 100ms), ConfigError);
}

TEST(StrategyTest, NamesSayWhatTheyAre) {
    EXPECT_EQ(WriteThenDelete().name(), "WriteThenDelete");
    EXPECT_EQ(DelayedDoubleDelete(500ms).name(), "DelayedDoubleDelete(500ms)");
    EXPECT_EQ(Lease().fill_mode(), FillMode::IfMarker);
    EXPECT_EQ(WriteThrough().fill_mode(), FillMode::IfMarker);
    EXPECT_TRUE(WriteThrough().needs_entry());
    EXPECT_THROW(DelayedDoubleDelete(0ms), ConfigError);
}

TEST(BackgroundSchedulerTest, RunsTasksInDueOrderWithoutBlockingTheCaller) {
    BackgroundScheduler scheduler;
    std::mutex m;
    std::vector<int> order;
    auto start = std::chrono::steady_clock::now();
    scheduler.run_after(60ms, [&] { std::lock_guard l(m); order.push_back(3); });
    scheduler.run_after(0ms, [&] { std::lock_guard l(m); order.push_back(1); });
    scheduler.run_after(30ms, [&] { std::lock_guard l(m); order.push_back(2); });
    EXPECT_LT(std::chrono::steady_clock::now() - start, 20ms);
    ASSERT_TRUE(scheduler.wait_idle(5s));
    EXPECT_GE(std::chrono::steady_clock::now() - start, 60ms);
    EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
    EXPECT_EQ(scheduler.pending(), 0u);
}

TEST(BackgroundSchedulerTest, ATaskMayScheduleMoreAndWaitIdleCoversThem) {
    BackgroundScheduler scheduler;
    std::atomic<int> runs{0};
    std::function<void()> again = [&] {
        if (runs.fetch_add(1) + 1 < 5) scheduler.run_after(5ms, again);
    };
    scheduler.run_after(0ms, again);
    ASSERT_TRUE(scheduler.wait_idle(5s));
    EXPECT_EQ(runs.load(), 5);
}

TEST(BackgroundSchedulerTest, AThrowingTaskDoesNotStopTheThread) {
    BackgroundScheduler scheduler;
    std::atomic<bool> ran{false};
    scheduler.run_after(0ms, [] { throw std::runtime_error("boom"); });
    scheduler.run_after(1ms, [&] { ran = true; });
    ASSERT_TRUE(scheduler.wait_idle(5s));
    EXPECT_TRUE(ran.load());
}

TEST(BackgroundSchedulerTest, WaitIdleTimesOutWhileATaskIsFarAway) {
    BackgroundScheduler scheduler;
    scheduler.run_after(10s, [] {});
    EXPECT_FALSE(scheduler.wait_idle(30ms));
    EXPECT_EQ(scheduler.pending(), 1u);
}  // destroyed with one task pending: dropped, logged

}  // namespace
}  // namespace lockstep
