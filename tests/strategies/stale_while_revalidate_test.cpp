// Stale-while-revalidate (RepositoryOptions::max_stale): while one reader refills a hot key whose
// TTL ran out, the others get the previous value at once, marked stale; never a value that a
// write invalidated (C2, C11 stay closed), never past max_stale, and nothing changes with the
// option off.
//
// An entry is put past its TTL by setting its remaining TTL inside the stale window (PEXPIRE
// below max_stale): that is exactly the state Redis reaches when the TTL runs out. The refilling
// reader is held inside its load at repo.after_db_read (a gate) while the others read.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "lockstep/core/fault_point.h"
#include "strategies_test_support.h"
#include "test_servers.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

constexpr auto kMaxStale = 60s;

class StaleWhileRevalidateTest : public ::testing::TestWithParam<std::string> {
protected:
    RepositoryOptions options(std::chrono::milliseconds max_stale = kMaxStale) const {
        RepositoryOptions o;
        o.key_prefix = prefix_;
        o.strategy = strategy_named(GetParam());
        o.ttl = 10min;
        o.ttl_jitter = 0ms;
        o.guard_wait = 10s;
        o.max_stale = max_stale;
        return o;
    }

    // A row at price 100 cached by `repo`, then changed to price 200 behind the library's back
    // (so that the refill's value differs from the cached one), then the entry put past its TTL.
    void cached_then_expired(CachedRepository<Product>& repo, std::int64_t id) {
        insert_product(id, 100);
        ASSERT_EQ(repo.get(id)->price, 100);
        db().execute("UPDATE products SET price = 200, version = 2 WHERE id = ?", {id});
        expire_into_stale_window(repo.key_of(id));
    }

    // The entry's remaining TTL set to half of max_stale: its TTL has run out, it is stale.
    static void expire_into_stale_window(const std::string& key) {
        ASSERT_EQ(redis().command({"PEXPIRE", key, std::to_string(std::chrono::milliseconds(kMaxStale).count() / 2)}).integer(), 1);
        ASSERT_GT(*cached_ttl(key), kMaxStale / 3) << "inside the stale window for the whole test";
    }

    std::string prefix_ = unique_key_prefix();
    ProductCleanup cleanup_;
};

// A reader that refills: held at the gate inside its database read.
struct HeldLoader {
    HeldLoader(CachedRepository<Product>& repo, std::int64_t id, const fault::Gate& gate)
        : actor("loader", [&repo, id, gate, this] {
              auto armed = arm_for_this_thread(repo_points::after_db_read, gate);
              got = repo.get_versioned(id);
          }) {}
    std::optional<Versioned<Product>> got;
    Actor actor;
};

TEST_P(StaleWhileRevalidateTest, ReadersGetThePreviousValueMarkedStaleWhileOneReaderRefillsAnExpiredKey) {
    const auto id = cleanup_.add(unique_id());
    CachedRepository<Product> repo(product_entity(), db(), redis(), options());
    cached_then_expired(repo, id);

    fault::Gate gate;
    HeldLoader loader(repo, id, gate);
    ASSERT_TRUE(gate.wait_arrivals(1, 10s)) << "the refilling reader reached its load";

    // Every other reader, from several threads, while the refill is held.
    std::atomic<int> stale_old{0}, other{0};
    std::vector<std::thread> readers;
    for (int t = 0; t < 8; ++t) {
        readers.emplace_back([&] {
            auto v = repo.get_versioned(id);
            (v && v->stale && v->value.price == 100 && v->version == 1 ? stale_old : other).fetch_add(1);
        });
    }
    for (auto& t : readers) t.join();
    EXPECT_FALSE(loader.actor.done()) << "the readers returned while the refill was still held";
    EXPECT_EQ(stale_old.load(), 8) << "each got the previous value, marked stale";
    EXPECT_EQ(other.load(), 0);
    EXPECT_EQ(repo.get(id)->price, 100) << "get() returns the value too";
    EXPECT_EQ(repo.metrics().stale_served, 9u);
    EXPECT_EQ(repo.metrics().guard_waits, 0u) << "nobody waited";

    gate.open();
    loader.actor.join();
    ASSERT_TRUE(loader.got);
    EXPECT_EQ(loader.got->value.price, 200);
    EXPECT_FALSE(loader.got->stale);

    // The refill landed with a whole TTL: readers get the new value, fresh.
    auto after = repo.get_versioned(id);
    ASSERT_TRUE(after);
    EXPECT_EQ(after->value.price, 200);
    EXPECT_FALSE(after->stale);
    EXPECT_EQ(cached_entry(repo.key_of(id))->version, 2);
    EXPECT_GT(*cached_ttl(repo.key_of(id)), kMaxStale) << "no longer in the stale window";
    EXPECT_FALSE(redis().get(refill_key_of(repo.key_of(id)))) << "the refill marker was given back";
    EXPECT_EQ(repo.metrics().loads, 2u) << "one load to cache, one refill";
}

TEST_P(StaleWhileRevalidateTest, C2_AnUpdateDuringTheRefillIsNeverFollowedByTheOldValue) {
    const auto id = cleanup_.add(unique_id());
    CachedRepository<Product> repo(product_entity(), db(), redis(), options());
    cached_then_expired(repo, id);

    fault::Gate gate;
    HeldLoader loader(repo, id, gate);
    ASSERT_TRUE(gate.wait_arrivals(1, 10s));
    // The held refill read price 200; now a write commits price 300 and invalidates the key.
    auto written = repo.update(id, [](Product& p) { p.price = 300; });
    ASSERT_TRUE(written);

    // Readers during the refill: none may get the stale value (or the refill's 200); they load
    // (one loader, the others wait for it) and get the written value.
    std::atomic<int> written_value{0}, other{0};
    std::vector<std::thread> readers;
    for (int t = 0; t < 8; ++t) {
        readers.emplace_back([&] {
            auto v = repo.get_versioned(id);
            (v && !v->stale && v->value.price == 300 ? written_value : other).fetch_add(1);
        });
    }
    for (auto& t : readers) t.join();
    EXPECT_EQ(written_value.load(), 8);
    EXPECT_EQ(other.load(), 0) << "a reader got the old or a stale value after the write";
    EXPECT_EQ(repo.metrics().stale_served, 0u);

    // The held refill carries the pre-write read: its fill is refused.
    const auto refused_before = repo.metrics().stale_sets_refused;
    gate.open();
    loader.actor.join();
    EXPECT_EQ(repo.metrics().stale_sets_refused, refused_before + 1);
    EXPECT_EQ(freshness(repo.key_of(id), id), Freshness::Fresh);
    EXPECT_EQ(repo.get(id)->price, 300);
    EXPECT_EQ(repo.metrics().stale_served, 0u);
}

TEST_P(StaleWhileRevalidateTest, C11_ARemoveAndReinsertDuringTheRefillIsNeverFollowedByTheOldValue) {
    const auto id = cleanup_.add(unique_id());
    CachedRepository<Product> repo(product_entity(), db(), redis(), options());
    cached_then_expired(repo, id);

    fault::Gate gate;
    HeldLoader loader(repo, id, gate);
    ASSERT_TRUE(gate.wait_arrivals(1, 10s));
    ASSERT_TRUE(repo.remove(id));
    repo.insert(Product{id, "again", 400, 1});

    auto v = repo.get_versioned(id);
    ASSERT_TRUE(v);
    EXPECT_EQ(v->value.price, 400);
    EXPECT_FALSE(v->stale);
    gate.open();
    loader.actor.join();
    EXPECT_EQ(freshness(repo.key_of(id), id), Freshness::Fresh);
    EXPECT_EQ(repo.get(id)->price, 400);
    EXPECT_EQ(repo.metrics().stale_served, 0u);
}

TEST_P(StaleWhileRevalidateTest, PastMaxStaleReadersDoNotGetTheStaleValue) {
    const auto id = cleanup_.add(unique_id());
    CachedRepository<Product> repo(product_entity(), db(), redis(), options());
    cached_then_expired(repo, id);

    fault::Gate gate;
    HeldLoader loader(repo, id, gate);
    ASSERT_TRUE(gate.wait_arrivals(1, 10s));
    // The stale window runs out while the refill is still held: Redis drops the entry.
    const std::string key = repo.key_of(id);
    ASSERT_EQ(redis().command({"PEXPIRE", key, "1"}).integer(), 1);
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (redis().command({"EXISTS", key}).integer() != 0) {
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "Redis did not expire the entry";
        std::this_thread::sleep_for(1ms);
    }

    auto v = repo.get_versioned(id);
    ASSERT_TRUE(v);
    EXPECT_EQ(v->value.price, 200) << "loaded, not the stale 100";
    EXPECT_FALSE(v->stale);
    EXPECT_EQ(repo.metrics().stale_served, 0u);
    gate.open();
    loader.actor.join();
    EXPECT_EQ(repo.get(id)->price, 200);
}

TEST_P(StaleWhileRevalidateTest, WhenTheRefillFailsTheNextReaderRefills) {
    const auto id = cleanup_.add(unique_id());
    CachedRepository<Product> repo(product_entity(), db(), redis(), options());
    cached_then_expired(repo, id);
    {
        fault::ArmOptions once;
        once.times = 1;
        auto failing = fault::arm(std::string(repo_points::after_db_read), fault::fail<ConnectionError>("database gone"), once);
        EXPECT_THROW(repo.get(id), ConnectionError);
    }
    EXPECT_FALSE(redis().get(refill_key_of(repo.key_of(id)))) << "the failed refiller gave its marker back";
    auto v = repo.get_versioned(id);
    ASSERT_TRUE(v);
    EXPECT_EQ(v->value.price, 200) << "this reader refilled it";
    EXPECT_FALSE(v->stale);
    EXPECT_EQ(repo.metrics().stale_served, 0u);
}

TEST_P(StaleWhileRevalidateTest, BatchReadsServeAndRefillStaleKeysToo) {
    const auto a = cleanup_.add(unique_id());
    const auto b = cleanup_.add(unique_id());
    CachedRepository<Product> repo(product_entity(), db(), redis(), options());
    cached_then_expired(repo, a);
    insert_product(b, 7);
    ASSERT_EQ(repo.get(b)->price, 7);

    fault::Gate gate;
    HeldLoader loader(repo, a, gate);
    ASSERT_TRUE(gate.wait_arrivals(1, 10s));
    auto both = repo.get_many({a, b});
    ASSERT_TRUE(both[0] && both[1]);
    EXPECT_EQ(both[0]->price, 100) << "stale, during the refill";
    EXPECT_EQ(both[1]->price, 7);
    EXPECT_EQ(repo.metrics().stale_served, 1u);
    gate.open();
    loader.actor.join();
    both = repo.get_many({a, b});
    EXPECT_EQ(both[0]->price, 200);
}

TEST_P(StaleWhileRevalidateTest, WithTheOptionOffReadersWaitForTheLoaderAsBefore) {
    const auto id = cleanup_.add(unique_id());
    CachedRepository<Product> repo(product_entity(), db(), redis(), options(0ms));
    insert_product(id, 100);
    ASSERT_EQ(repo.get(id)->price, 100);
    EXPECT_LE(*cached_ttl(repo.key_of(id)), 10min) << "the fill added nothing to the TTL";
    db().execute("UPDATE products SET price = 200, version = 2 WHERE id = ?", {id});
    // Without max_stale an entry with little TTL left is an ordinary hit...
    expire_into_stale_window(repo.key_of(id));
    auto hit = repo.get_versioned(id);
    EXPECT_EQ(hit->value.price, 100);
    EXPECT_FALSE(hit->stale);

    // ...and once it has expired, the readers wait for the one loader.
    redis().del({repo.key_of(id)});
    fault::Gate gate;
    HeldLoader loader(repo, id, gate);
    ASSERT_TRUE(gate.wait_arrivals(1, 10s));
    std::optional<Versioned<Product>> waited;
    Actor reader("reader", [&] { waited = repo.get_versioned(id); });
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (repo.metrics().guard_waits == 0) {
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the reader did not wait for the loader";
        std::this_thread::sleep_for(1ms);
    }
    EXPECT_FALSE(reader.done()) << "waiting, not served";
    gate.open();
    loader.actor.join();
    reader.join();
    ASSERT_TRUE(waited);
    EXPECT_EQ(waited->value.price, 200);
    EXPECT_FALSE(waited->stale);
    EXPECT_EQ(repo.metrics().stale_served, 0u);
    EXPECT_EQ(repo.metrics().loads, 2u);
}

INSTANTIATE_TEST_SUITE_P(Strategies, StaleWhileRevalidateTest,
                         ::testing::Values("WriteThenDelete", "Lease", "WriteThrough", "DelayedDoubleDelete:50"),
                         [](const auto& info) {
                             std::string n = info.param;
                             for (auto& c : n) {
                                 if (c == ':') c = '_';
                             }
                             return n;
                         });

TEST(StaleWhileRevalidateOptionsTest, ANegativeMaxStaleIsAConfigError) {
    RepositoryOptions o;
    o.key_prefix = unique_key_prefix();
    o.max_stale = -1ms;
    EXPECT_THROW(CachedRepository<Product>(product_entity(), db(), redis(), o), ConfigError);
}

}  // namespace
}  // namespace lockstep::test
