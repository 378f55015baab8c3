// The in-memory Cache fake, driven by a test clock so TTLs are checked without sleeping.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/cache/cache.h"
#include "lockstep/core/error.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;

class InMemoryCacheTest : public ::testing::Test {
protected:
    std::chrono::steady_clock::time_point now_{};  // the test clock; only this thread moves it
    std::unique_ptr<Cache> cache_ = make_in_memory_cache([this] { return now_; });
};

TEST_F(InMemoryCacheTest, MissIsNullopt) {
    EXPECT_EQ(cache_->get("absent"), std::nullopt);
}

TEST_F(InMemoryCacheTest, ValueIsVisibleUntilItsTtlPasses) {
    cache_->set("k", "v", 100ms);
    now_ += 99ms;
    EXPECT_EQ(cache_->get("k"), "v");
    now_ += 1ms;
    EXPECT_EQ(cache_->get("k"), std::nullopt);
}

TEST_F(InMemoryCacheTest, SetReplacesValueAndTtl) {
    cache_->set("k", "old", 10ms);
    cache_->set("k", "new", 1s);
    now_ += 500ms;
    EXPECT_EQ(cache_->get("k"), "new");
}

TEST_F(InMemoryCacheTest, RemoveSaysWhetherALiveKeyExisted) {
    cache_->set("k", "v", 1s);
    EXPECT_TRUE(cache_->remove("k"));
    EXPECT_FALSE(cache_->remove("k"));
    cache_->set("old", "v", 10ms);
    now_ += 10ms;
    EXPECT_FALSE(cache_->remove("old"));  // expired counts as absent, as in Redis
}

TEST_F(InMemoryCacheTest, RemoveManyCountsLiveKeys) {
    cache_->set("a", "1", 1s);
    cache_->set("b", "2", 1s);
    cache_->set("c", "3", 5ms);
    now_ += 5ms;
    EXPECT_EQ(cache_->remove_many({"a", "b", "c", "d"}), 2u);
    EXPECT_EQ(cache_->get("a"), std::nullopt);
    EXPECT_EQ(cache_->remove_many({}), 0u);
}

TEST_F(InMemoryCacheTest, ValuesAndKeysAreBinarySafe) {
    const std::string key("k\0x", 3);
    const std::string value("\0\1\2", 3);
    cache_->set(key, value, 1s);
    EXPECT_EQ(cache_->get(key), value);
    EXPECT_EQ(cache_->get("k"), std::nullopt);
}

TEST_F(InMemoryCacheTest, NonPositiveTtlIsAConfigError) {
    EXPECT_THROW(cache_->set("k", "v", 0ms), ConfigError);
    EXPECT_THROW(cache_->set("k", "v", -1ms), ConfigError);
}

TEST(InMemoryCacheRealClockTest, ExpiresOnTheSteadyClock) {
    auto cache = make_in_memory_cache();
    cache->set("long", "v", 1h);
    cache->set("short", "v", 1ms);
    std::this_thread::sleep_for(5ms);  // strictly longer than the TTL: the clock is monotonic
    EXPECT_EQ(cache->get("long"), "v");
    EXPECT_EQ(cache->get("short"), std::nullopt);
}

TEST(InMemoryCacheRealClockTest, IsSafeFromManyThreads) {
    auto cache = make_in_memory_cache();
    std::vector<std::thread> threads;
    std::atomic<int> hits{0};
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < 2000; ++i) {
                const std::string key = "k" + std::to_string((i + t) % 50);
                cache->set(key, std::to_string(i), 1h);
                if (cache->get(key)) hits.fetch_add(1);
                if (i % 7 == 0) cache->remove(key);
            }
        });
    }
    for (auto& th : threads) th.join();
    EXPECT_GT(hits.load(), 0);
}

}  // namespace
}  // namespace lockstep
