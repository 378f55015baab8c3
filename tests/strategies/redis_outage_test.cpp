// Failures: Redis killed mid-run (reads keep working from MySQL, writes still commit, their
// deletes are queued and land once Redis is back), a cache that refuses deletes while it keeps
// its data (the retried deletes remove the stale entries), deletes given up on once every entry
// they could concern has expired, and a lost invalidation (C5) that the retry queue closes.
#include <gtest/gtest.h>

#include <thread>

#include "eventually.h"
#include "strategies_test_support.h"
#include "test_servers.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

// An EntryStore that fails every call with ConnectionError while `down` is set.
class SwitchableStore final : public EntryStore {
public:
    explicit SwitchableStore(std::shared_ptr<EntryStore> inner) : inner_(std::move(inner)) {}
    std::atomic<bool> down{false};

    std::optional<std::string> get(const std::string& key) override { return check(), inner_->get(key); }
    std::vector<std::optional<std::string>> get_many(const std::vector<std::string>& keys) override {
        return check(), inner_->get_many(keys);
    }
    Claim claim(const std::string& key, const std::string& marker, std::chrono::milliseconds ttl) override {
        return check(), inner_->claim(key, marker, ttl);
    }
    std::vector<Claim> claim_many(const std::vector<std::string>& keys, const std::vector<std::string>& markers,
                                  std::chrono::milliseconds ttl) override {
        return check(), inner_->claim_many(keys, markers, ttl);
    }
    FillOutcome fill(const Fill& f) override { return check(), inner_->fill(f); }
    std::vector<FillOutcome> fill_many(const std::vector<Fill>& fills) override {
        return check(), inner_->fill_many(fills);
    }
    bool remove_if_equals(const std::string& key, const std::string& expected) override {
        return check(), inner_->remove_if_equals(key, expected);
    }
    void remove(const std::vector<std::string>& keys) override { check(), inner_->remove(keys); }

private:
    void check() const {
        if (down) throw ConnectionError("injected: cache unreachable");
    }
    std::shared_ptr<EntryStore> inner_;
};

RepositoryOptions quick_retries(const std::string& prefix) {
    RepositoryOptions o;
    o.key_prefix = prefix;
    o.cache_retry_after = 100ms;
    o.delete_retry_initial = 20ms;
    o.delete_retry_max = 200ms;
    return o;
}

TEST(RedisOutageTest, RedisKilledMidRunReadsFallBackAndQueuedDeletesLandAfterRestart) {
    LOCKSTEP_REQUIRE_OWNED_REDIS();
    ProductCleanup cleanup;
    const std::string prefix = unique_key_prefix();
    RedisOptions ro = strategies_redis_options();
    ro.connect_timeout = 300ms;
    ro.socket_timeout = 500ms;
    RedisClient client(ro);
    RedisLockClient lock_client(client);
    RedisLockService lock_service(lock_client);
    auto plain = quick_retries(prefix);
    auto locked = quick_retries(unique_key_prefix());
    locked.strategy = std::make_shared<Lease>();
    locked.lock_mode = LockMode::Mutex;
    locked.lock_service = &lock_service;
    locked.lock_wait = 1s;
    CachedRepository<Product> a(product_entity(), db(), client, plain);
    CachedRepository<Product> b(product_entity(), db(), client, locked);

    std::vector<std::int64_t> ids;
    for (int i = 0; i < 10; ++i) {
        ids.push_back(cleanup.add(unique_id()));
        insert_product(ids.back(), 100 + i);
        ASSERT_EQ(a.get(ids.back())->price, 100 + i);
        ASSERT_EQ(b.get(ids.back())->price, 100 + i);
    }

    servers().kill_redis();
    for (int i = 0; i < 10; ++i) {
        EXPECT_EQ(a.get(ids[i])->price, 100 + i) << "reads are served from MySQL";
        a.update(ids[i], [](Product& p) { p.price += 1000; });
        EXPECT_EQ(b.get(ids[i])->price, 1100 + i) << "the Mutex repository reads without its lock";
        b.update(ids[i], [](Product& p) { p.price += 1000; });
        EXPECT_EQ(a.get(ids[i])->price, 2100 + i);
    }
    for (auto* r : {&a, &b}) {
        auto m = r->metrics();
        EXPECT_GE(m.degraded_reads, 10u) << to_string(m);
        EXPECT_GT(m.cache_errors, 0u);
        EXPECT_EQ(m.deletes_pending, 10u) << "every write's delete is queued";
    }

    servers().start_redis();
    for (auto* r : {&a, &b}) {
        ASSERT_TRUE(eventually([&] { return r->metrics().deletes_pending == 0; }, 20s)) << to_string(r->metrics());
        EXPECT_GT(r->metrics().deletes_retried, 0u);
        EXPECT_EQ(r->metrics().deletes_abandoned, 0u);
    }
    // Every key agrees with the database, and the cache is in use again.
    ASSERT_TRUE(eventually([&] { return a.get(ids[0]).has_value() && cached_entry(a.key_of(ids[0])); }, 5s));
    for (int i = 0; i < 10; ++i) {
        for (auto* r : {&a, &b}) {
            EXPECT_EQ(r->get(ids[i])->price, 2100 + i);
            EXPECT_EQ(freshness(r->key_of(ids[i]), ids[i]), Freshness::Fresh);
        }
    }
}

TEST(RedisOutageTest, C5_DeletesThatFailAreRetriedUntilTheyRemoveTheStaleEntries) {
    ProductCleanup cleanup;
    auto store = std::make_shared<SwitchableStore>(make_redis_entry_store(redis()));
    CachedRepository<Product> repo(product_entity(), db(), store, quick_retries(unique_key_prefix()));
    std::vector<std::int64_t> ids;
    for (int i = 0; i < 5; ++i) {
        ids.push_back(cleanup.add(unique_id()));
        insert_product(ids.back(), 1);
        repo.get(ids.back());
    }
    store->down = true;  // unreachable, but it keeps its data: the v1 entries stay there
    for (auto id : ids) {
        repo.update(id, [](Product& p) { p.price = 2; });
        EXPECT_EQ(repo.get(id)->price, 2) << "reads bypass the failing cache";
    }
    for (auto id : ids) EXPECT_EQ(freshness(repo.key_of(id), id), Freshness::Stale) << "the deletes did not land";
    EXPECT_EQ(repo.metrics().deletes_pending, 5u);
    std::this_thread::sleep_for(150ms);  // a few failed retries
    store->down = false;
    ASSERT_TRUE(eventually([&] { return repo.metrics().deletes_pending == 0; }, 10s)) << to_string(repo.metrics());
    for (auto id : ids) {
        EXPECT_EQ(freshness(repo.key_of(id), id), Freshness::Fresh);
        EXPECT_FALSE(cached_entry(repo.key_of(id)));
    }
    std::this_thread::sleep_for(150ms);  // past cache_retry_after: reads use the cache again
    for (auto id : ids) EXPECT_EQ(repo.get(id)->price, 2);
    auto m = repo.metrics();
    EXPECT_GE(m.deletes_retried, 5u) << to_string(m);
    EXPECT_GE(m.deletes_failed, 5u);
    EXPECT_EQ(m.deletes_abandoned, 0u);
}

TEST(RedisOutageTest, ADeleteIsGivenUpOnlyAfterEveryEntryItConcernsHasExpired) {
    ProductCleanup cleanup;
    auto store = std::make_shared<SwitchableStore>(make_redis_entry_store(redis()));
    auto o = quick_retries(unique_key_prefix());
    o.ttl = 300ms;
    o.ttl_jitter = 0ms;
    o.negative_ttl = 100ms;
    o.marker_ttl = 100ms;
    CachedRepository<Product> repo(product_entity(), db(), store, o);
    auto id = cleanup.add(unique_id());
    insert_product(id, 1);
    store->down = true;
    repo.update(id, [](Product& p) { p.price = 2; });
    ASSERT_TRUE(eventually([&] { return repo.metrics().deletes_abandoned == 1; }, 5s)) << to_string(repo.metrics());
    EXPECT_EQ(repo.metrics().deletes_pending, 0u);
}

TEST(RedisOutageTest, C5_AWriterThatFailsBetweenCommitAndDeleteLeavesTheCacheStale) {
    // The lost invalidation itself, forced: the write commits, then "crashes" before its delete.
    // Nothing in-process can close this (the process is gone); the entry's TTL bounds it, and an
    // outbox written in the same transaction would close it (docs/races.md, C5).
    ProductCleanup cleanup;
    RepositoryOptions o;
    o.key_prefix = unique_key_prefix();
    CachedRepository<Product> repo(product_entity(), db(), redis(), o);
    auto id = cleanup.add(unique_id());
    insert_product(id, 1);
    repo.get(id);
    {
        fault::ArmOptions once;
        once.times = 1;
        once.only_thread = std::this_thread::get_id();
        auto crash = fault::arm(std::string(repo_points::after_commit), fault::fail<ConnectionError>("injected crash"), once);
        EXPECT_THROW(repo.update(id, [](Product& p) { p.price = 2; }), ConnectionError);
    }
    EXPECT_EQ(db_price(id), 2) << "the write committed";
    EXPECT_EQ(freshness(repo.key_of(id), id), Freshness::Stale);
    redis().del({repo.key_of(id)});
}

}  // namespace
}  // namespace lockstep::test
