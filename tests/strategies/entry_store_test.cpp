// The EntryStore contract, run against both implementations: the Lua scripts on the private
// Redis, and the mutex emulation over the in-memory Cache.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "lockstep/cache/cache.h"
#include "strategies_test_support.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

enum class Backend { Redis, InMemory };

class EntryStoreTest : public ::testing::TestWithParam<Backend> {
protected:
    void SetUp() override {
        if (GetParam() == Backend::Redis) {
            store_ = make_redis_entry_store(redis());
        } else {
            memory_ = make_in_memory_cache();
            store_ = make_cache_entry_store(*memory_);
        }
        key_ = unique_key_prefix() + "{product:1}";
    }
    void TearDown() override { store_->remove({key_}); }

    Fill if_newer(std::optional<std::int64_t> version, std::string payload = "p") {
        Fill f;
        f.key = key_;
        f.entry = version ? CacheEntry::encode_value(*version, payload) : CacheEntry::encode_not_found();
        f.ttl = 10s;
        f.mode = FillMode::IfNewer;
        f.version = version;
        return f;
    }

    // Puts `version` in the key unconditionally (what a reader's fill over its marker does).
    void put(std::int64_t version, std::string payload = "p") {
        Fill f;
        f.key = key_;
        f.entry = CacheEntry::encode_value(version, payload);
        f.ttl = 10s;
        store_->fill(f);
    }

    std::unique_ptr<Cache> memory_;
    std::shared_ptr<EntryStore> store_;
    std::string key_;
};

TEST_P(EntryStoreTest, ClaimTakesAnEmptyKeyOnly) {
    auto first = store_->claim(key_, "L:a", 5s);
    EXPECT_EQ(first.result, Claim::Result::Claimed);
    EXPECT_EQ(store_->get(key_), "L:a");
    EXPECT_EQ(store_->claim(key_, "L:b", 5s).result, Claim::Result::Busy);
    store_->remove({key_});
    put(3);
    auto present = store_->claim(key_, "L:c", 5s);
    EXPECT_EQ(present.result, Claim::Result::Present);
    EXPECT_EQ(present.entry, CacheEntry::encode_value(3, "p"));
}

TEST_P(EntryStoreTest, FillIfMarkerLandsOnlyOverTheCallersOwnMarker) {
    ASSERT_EQ(store_->claim(key_, "L:mine", 5s).result, Claim::Result::Claimed);
    Fill f;
    f.key = key_;
    f.entry = CacheEntry::encode_value(1, "x");
    f.ttl = 10s;
    f.mode = FillMode::IfMarker;
    f.marker = "L:other";
    EXPECT_EQ(store_->fill(f), FillOutcome::Refused);
    f.marker = "L:mine";
    EXPECT_EQ(store_->fill(f), FillOutcome::Stored);
    EXPECT_EQ(store_->get(key_), CacheEntry::encode_value(1, "x"));
    // A write's DEL destroys the marker: the late fill is refused (C2).
    ASSERT_EQ(store_->claim(key_, "L:again", 5s).result, Claim::Result::Present);
    store_->remove({key_});
    ASSERT_EQ(store_->claim(key_, "L:again", 5s).result, Claim::Result::Claimed);
    store_->remove({key_});
    f.marker = "L:again";
    EXPECT_EQ(store_->fill(f), FillOutcome::Refused);
    EXPECT_FALSE(store_->get(key_));
}

TEST_P(EntryStoreTest, FillIfNewerRefreshesOnlyAnOlderValue) {
    EXPECT_EQ(store_->fill(if_newer(5, "five")), FillOutcome::Cleared) << "B2: never on an empty key";
    EXPECT_FALSE(store_->get(key_));
    put(5, "five");
    EXPECT_EQ(store_->fill(if_newer(5, "five")), FillOutcome::Unchanged);
    EXPECT_EQ(store_->fill(if_newer(10, "ten")), FillOutcome::Stored);  // 10 > 5 although "10" < "5" as text
    EXPECT_EQ(store_->get(key_), CacheEntry::encode_value(10, "ten"));
    EXPECT_EQ(store_->fill(if_newer(11, "eleven")), FillOutcome::Stored);
    EXPECT_EQ(store_->get(key_), CacheEntry::encode_value(11, "eleven"));
}

TEST_P(EntryStoreTest, FillIfNewerDeletesAHigherVersionInsteadOfPinningIt) {
    // C1 (a newer write landed first) or C11 (versions went backwards): either way the set is
    // refused AND the entry goes, so an entry the database contradicts never outlives a write.
    put(10, "ten");
    EXPECT_EQ(store_->fill(if_newer(9, "nine")), FillOutcome::Refused);
    EXPECT_FALSE(store_->get(key_));
}

TEST_P(EntryStoreTest, FillIfNewerClearsNotFoundMarkersAndGarbage) {
    Fill not_found;
    not_found.key = key_;
    not_found.entry = CacheEntry::encode_not_found();
    not_found.ttl = 10s;
    store_->fill(not_found);
    EXPECT_EQ(store_->fill(if_newer(1)), FillOutcome::Cleared);
    EXPECT_FALSE(store_->get(key_));
    store_->claim(key_, "L:loader", 5s);
    EXPECT_EQ(store_->fill(if_newer(2)), FillOutcome::Cleared) << "a reader's lease is destroyed (C2)";
    EXPECT_FALSE(store_->get(key_));
    Fill garbage;
    garbage.key = key_;
    garbage.entry = "v01:not canonical";
    garbage.ttl = 10s;
    store_->fill(garbage);
    EXPECT_EQ(store_->fill(if_newer(1)), FillOutcome::Cleared);
    EXPECT_FALSE(store_->get(key_));
}

TEST_P(EntryStoreTest, RemoveIfEqualsComparesFirst) {
    put(1, "a");
    EXPECT_FALSE(store_->remove_if_equals(key_, "something else"));
    EXPECT_TRUE(store_->get(key_));
    EXPECT_TRUE(store_->remove_if_equals(key_, CacheEntry::encode_value(1, "a")));
    EXPECT_FALSE(store_->get(key_));
}

TEST_P(EntryStoreTest, BatchFormsMatchTheSingleOnes) {
    const std::string other = unique_key_prefix() + "{product:2}";
    auto claims = store_->claim_many({key_, other}, {"L:1", "L:2"}, 5s);
    ASSERT_EQ(claims.size(), 2u);
    EXPECT_EQ(claims[0].result, Claim::Result::Claimed);
    EXPECT_EQ(claims[1].result, Claim::Result::Claimed);
    Fill a;
    a.key = key_;
    a.entry = CacheEntry::encode_value(1, "a");
    a.ttl = 10s;
    a.mode = FillMode::IfMarker;
    a.marker = "L:1";
    Fill b = a;
    b.key = other;
    b.marker = "L:wrong";
    Fill c = if_newer(1);
    c.key = unique_key_prefix() + "{product:3}";
    auto outcomes = store_->fill_many({a, b, c});
    EXPECT_EQ(outcomes, (std::vector<FillOutcome>{FillOutcome::Stored, FillOutcome::Refused, FillOutcome::Cleared}));
    auto got = store_->get_many({key_, other, c.key, "absent"});
    ASSERT_EQ(got.size(), 4u);
    EXPECT_EQ(got[0], CacheEntry::encode_value(1, "a"));
    EXPECT_EQ(got[1], "L:2");
    EXPECT_FALSE(got[2]) << "a writer's set never lands on an empty key (B2)";
    EXPECT_FALSE(got[3]);
    store_->remove({other, c.key});
    EXPECT_FALSE(store_->get(other));
}

INSTANTIATE_TEST_SUITE_P(Backends, EntryStoreTest, ::testing::Values(Backend::Redis, Backend::InMemory),
                         [](const auto& info) { return info.param == Backend::Redis ? "Redis" : "InMemory"; });

TEST(RedisEntryStoreTest, ScriptsAreReloadedAfterScriptFlush) {
    auto store = make_redis_entry_store(redis());
    const std::string key = unique_key_prefix() + "{product:1}";
    // The flush on the server that runs the key's scripts (its slot's master on a cluster: a
    // keyless SCRIPT FLUSH would go to some master, maybe another, and prove nothing).
    redis().connection_for_key(key)->command({"SCRIPT", "FLUSH"});
    EXPECT_EQ(store->claim(key, "L:x", 5s).result, Claim::Result::Claimed);
    redis().connection_for_key(key)->command({"SCRIPT", "FLUSH"});
    Fill f;
    f.key = key;
    f.entry = CacheEntry::encode_value(1, "a");
    f.ttl = 5s;
    f.mode = FillMode::IfMarker;
    f.marker = "L:x";
    EXPECT_EQ(store->fill_many({f}), std::vector<FillOutcome>{FillOutcome::Stored});  // pipeline path
    store->remove({key});
}

TEST(RedisEntryStoreTest, FillsCarryTheirTtl) {
    auto store = make_redis_entry_store(redis());
    const std::string key = unique_key_prefix() + "{product:1}";
    Fill f;
    f.key = key;
    f.entry = CacheEntry::encode_value(1, "a");
    f.ttl = 7000ms;
    store->fill(f);
    auto ttl = cached_ttl(key);
    ASSERT_TRUE(ttl);
    EXPECT_GT(*ttl, 6000ms);
    EXPECT_LE(*ttl, 7000ms);
    store->remove({key});
}

}  // namespace
}  // namespace lockstep::test
