// RedisCache: the Cache interface on a real Redis.
#include "lockstep/cache/redis_cache.h"

#include <gtest/gtest.h>

#include <thread>

#include "lockstep/core/error.h"
#include "redis_fixture.h"

namespace lockstep::test {
namespace {

class RedisCacheTest : public RedisTest {
protected:
    void SetUp() override {
        RedisTest::SetUp();
        cache_ = std::make_unique<RedisCache>(*client_);
    }
    std::unique_ptr<RedisCache> cache_;
};

TEST_F(RedisCacheTest, SetThenGetReturnsTheBytes) {
    const std::string value("v\0w", 3);
    cache_->set(key("k"), value, 60s);
    EXPECT_EQ(cache_->get(key("k")), value);
    EXPECT_EQ(cache_->get(key("absent")), std::nullopt);
}

TEST_F(RedisCacheTest, SetUsesMillisecondExpiry) {
    cache_->set(key("k"), "v", 1500ms);
    const long long pttl = client_->command({"PTTL", key("k")}).integer();
    EXPECT_GT(pttl, 0);
    EXPECT_LE(pttl, 1500);
}

TEST_F(RedisCacheTest, EntryIsGoneOnceItsTtlPassed) {
    cache_->set(key("k"), "v", 20ms);
    std::this_thread::sleep_for(40ms);  // Redis checks expiry on access with ms precision
    EXPECT_EQ(cache_->get(key("k")), std::nullopt);
}

TEST_F(RedisCacheTest, RemoveSaysWhetherTheKeyExisted) {
    cache_->set(key("k"), "v", 60s);
    EXPECT_TRUE(cache_->remove(key("k")));
    EXPECT_FALSE(cache_->remove(key("k")));
}

TEST_F(RedisCacheTest, RemoveManyCountsExistingKeys) {
    cache_->set(key("a"), "1", 60s);
    cache_->set(key("b"), "2", 60s);
    EXPECT_EQ(cache_->remove_many({key("a"), key("b"), key("c")}), 2u);
    EXPECT_EQ(cache_->remove_many({}), 0u);
}

TEST_F(RedisCacheTest, NonPositiveTtlIsAConfigError) {
    EXPECT_THROW(cache_->set(key("k"), "v", 0ms), ConfigError);
}

TEST(RedisCacheDownTest, UnreachableServerIsAConnectionError) {
    RedisOptions o;
    o.port = refused_port();
    RedisClient client(o);
    RedisCache cache(client);
    EXPECT_THROW(cache.get("k"), ConnectionError);
    EXPECT_THROW(cache.set("k", "v", 1s), ConnectionError);
    EXPECT_THROW(cache.remove("k"), ConnectionError);
}

}  // namespace
}  // namespace lockstep::test
