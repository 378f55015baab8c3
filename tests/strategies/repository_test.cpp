// CachedRepository against the private Redis and MariaDB: reads, writes, versions, negative
// caching (C7), get_many, undecodable entries, TTL jitter, two repositories side by side.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "lockstep/cache/cache.h"
#include "strategies_test_support.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

class RepositoryTest : public ::testing::Test {
protected:
    RepositoryOptions options(std::shared_ptr<const WriteStrategy> strategy = nullptr) {
        RepositoryOptions o;
        o.key_prefix = prefix_;
        o.strategy = std::move(strategy);
        o.lock_service = &lock_service();
        return o;
    }
    std::unique_ptr<CachedRepository<Product>> repo(RepositoryOptions o) {
        return std::make_unique<CachedRepository<Product>>(product_entity(), db(), redis(), std::move(o));
    }
    std::int64_t product(std::int64_t price = 100) {
        auto id = cleanup_.add(unique_id());
        insert_product(id, price);
        return id;
    }

    std::string prefix_ = unique_key_prefix();
    ProductCleanup cleanup_;
};

TEST_F(RepositoryTest, AMissLoadsAndBackfillsThenHitsComeFromTheCache) {
    auto r = repo(options());
    auto id = product(250);
    auto first = r->get_versioned(id);
    ASSERT_TRUE(first);
    EXPECT_EQ(first->value.price, 250);
    EXPECT_EQ(first->version, 1);
    auto entry = cached_entry(r->key_of(id));
    ASSERT_TRUE(entry);
    EXPECT_EQ(entry->kind, CacheEntry::Kind::Value);
    EXPECT_EQ(entry->version, 1);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(r->get(id)->price, 250);
    auto m = r->metrics();
    EXPECT_EQ(m.misses, 1u);
    EXPECT_EQ(m.loads, 1u);
    EXPECT_EQ(m.fills, 1u);
    EXPECT_EQ(m.hits, 5u);
}

TEST_F(RepositoryTest, UpdateBumpsTheVersionAndInvalidates) {
    auto r = repo(options());
    auto id = product(100);
    r->get(id);
    auto updated = r->update(id, [](Product& p) { p.price = 175; });
    ASSERT_TRUE(updated);
    EXPECT_EQ(updated->price, 175);
    EXPECT_GT(db_version(id).value_or(0), 1);
    EXPECT_FALSE(cached_entry(r->key_of(id))) << "WriteThenDelete deletes after commit";
    auto again = r->get_versioned(id);
    EXPECT_EQ(again->value.price, 175);
    EXPECT_EQ(again->version, db_version(id));
}

TEST_F(RepositoryTest, UpdateOfAMissingRowReturnsNulloptAndChangesNothing) {
    auto r = repo(options());
    auto id = cleanup_.add(unique_id());
    EXPECT_FALSE(r->update(id, [](Product& p) { p.price = 1; }));
    EXPECT_FALSE(db_version(id));
}

TEST_F(RepositoryTest, AnExceptionFromTheUpdateFunctionRollsBack) {
    auto r = repo(options());
    auto id = product(100);
    EXPECT_THROW(r->update(id, [](Product& p) {
        p.price = 5;
        throw std::runtime_error("no");
    }),
                 std::runtime_error);
    EXPECT_EQ(db_price(id), 100);
    EXPECT_EQ(db_version(id), 1);
    EXPECT_THROW(r->update(id, [](Product& p) { p.id += 1; }), ConfigError);
    EXPECT_EQ(db_version(id), 1);
}

TEST_F(RepositoryTest, InsertAndRemoveKeepTheCacheHonest) {
    auto r = repo(options());
    auto id = cleanup_.add(unique_id());
    EXPECT_FALSE(r->get(id));
    EXPECT_EQ(cached_entry(r->key_of(id))->kind, CacheEntry::Kind::NotFound);
    r->insert(Product{id, "new", 10, 3});
    EXPECT_GT(db_version(id).value_or(0), 1'000'000'000'000'000) << "versions start at the database clock (C11)";
    EXPECT_FALSE(cached_entry(r->key_of(id))) << "the insert deleted the cached not-found";
    EXPECT_EQ(r->get(id)->name, "new");
    EXPECT_THROW(r->insert(Product{id, "again", 1, 1}), DbError);
    EXPECT_TRUE(r->remove(id));
    EXPECT_FALSE(r->remove(id));
    EXPECT_FALSE(r->get(id));
    EXPECT_FALSE(db_version(id));
}

TEST_F(RepositoryTest, DuplicateInsertIsADbErrorWithCode1062) {
    auto r = repo(options());
    auto id = product();
    try {
        r->insert(Product{id, "dup", 1, 1});
        FAIL() << "expected DbError";
    } catch (const DbError& e) {
        EXPECT_EQ(e.code(), 1062);
        EXPECT_EQ(e.recovery(), Recovery::GiveUp);
    }
}

// C7: penetration. A missing id is loaded once, then answered from the negative entry.
TEST_F(RepositoryTest, C7_ThousandLookupsOfAMissingIdCostOneQuery) {
    auto r = repo(options());
    auto id = cleanup_.add(unique_id());
    for (int i = 0; i < 1000; ++i) ASSERT_FALSE(r->get(id));
    auto m = r->metrics();
    EXPECT_EQ(m.loads, 1u);
    EXPECT_EQ(m.negative_hits, 999u);
    auto ttl = cached_ttl(r->key_of(id));
    ASSERT_TRUE(ttl);
    EXPECT_LE(*ttl, r->options().negative_ttl);
}

TEST_F(RepositoryTest, C7_ConcurrentLookupsOfAMissingIdCostOneQuery) {
    auto o = options();
    o.guard_wait = 10s;
    auto r = repo(o);
    auto id = cleanup_.add(unique_id());
    std::vector<std::thread> threads;
    std::atomic<int> found{0};
    for (int t = 0; t < 10; ++t) {
        threads.emplace_back([&] {
            for (int i = 0; i < 100; ++i) {
                if (r->get(id)) found.fetch_add(1);
            }
        });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(found.load(), 0);
    EXPECT_EQ(r->metrics().loads, 1u) << to_string(r->metrics());
}

TEST_F(RepositoryTest, NegativeCachingCanBeTurnedOff) {
    auto o = options();
    o.negative_ttl = 0ms;
    auto r = repo(o);
    auto id = cleanup_.add(unique_id());
    for (int i = 0; i < 3; ++i) EXPECT_FALSE(r->get(id));
    EXPECT_EQ(r->metrics().loads, 3u);
    EXPECT_FALSE(cached_entry(r->key_of(id)));
}

TEST_F(RepositoryTest, GetManyAnswersHitsInOneBatchAndLoadsTheRestTogether) {
    auto r = repo(options());
    auto a = product(1), b = product(2), c = product(3);
    auto missing = cleanup_.add(unique_id());
    r->get(a);  // cached
    auto before = r->metrics();
    auto got = r->get_many({a, b, missing, c, b});
    ASSERT_EQ(got.size(), 5u);
    EXPECT_EQ(got[0]->price, 1);
    EXPECT_EQ(got[1]->price, 2);
    EXPECT_FALSE(got[2]);
    EXPECT_EQ(got[3]->price, 3);
    EXPECT_EQ(got[4]->price, 2) << "a duplicate id gets the same value";
    auto m = r->metrics();
    EXPECT_EQ(m.hits - before.hits, 1u);
    EXPECT_EQ(m.loads - before.loads, 3u) << "b, missing, c; the duplicate is not loaded twice";
    EXPECT_EQ(cached_entry(r->key_of(b))->version, 1);
    EXPECT_EQ(cached_entry(r->key_of(missing))->kind, CacheEntry::Kind::NotFound);
    auto again = r->get_many({a, b, c, missing});
    EXPECT_EQ(r->metrics().loads, m.loads) << "everything cached now";
    EXPECT_EQ(again[2]->price, 3);
}

TEST_F(RepositoryTest, GetManyCountsAndTimesEachIdAsThatManySingleGetsWould) {
    // The counter and latency deltas of one repository, by name (counters, and the counts of
    // the histograms a read records once per id).
    auto delta = [](const RepositoryMetrics& after, const RepositoryMetrics& before) {
        std::map<std::string, std::uint64_t> before_by_name, out;
        auto histograms = [](std::map<std::string, std::uint64_t>& into) {
            return [&into](const char* name, const char*, const HistogramSnapshot& h) {
                const std::string n = name;
                if (n == "hit" || n == "miss_load" || n == "lock_wait" || n == "lock_hold") {
                    into[n + ".count"] = h.count;
                }
            };
        };
        for_each_metric(
            before, [&](const char* name, const char*, std::uint64_t v) { before_by_name[name] = v; },
            histograms(before_by_name));
        for_each_metric(
            after, [&](const char* name, const char*, std::uint64_t v) { out[name] = v; }, histograms(out));
        for (auto& [name, v] : out) v -= before_by_name[name];
        return out;
    };
    for (std::string s : {"WriteThenDelete", "Lease"}) {
        for (auto mode : {LockMode::None, LockMode::Mutex, LockMode::ReadWrite}) {
            SCOPED_TRACE(s + " " + std::string(to_string(mode)));
            auto make = [&] {
                auto o = options(strategy_named(s));
                o.key_prefix = unique_key_prefix();
                o.lock_mode = mode;
                return repo(o);
            };
            auto batch = make();
            auto single = make();
            const std::vector<std::int64_t> ids = {product(1), product(2), product(3), cleanup_.add(unique_id()),
                                                   cleanup_.add(unique_id())};
            // The same start in both: a value (ids[0]) and a "not found" (ids[3]) cached.
            for (auto* r : {batch.get(), single.get()}) {
                r->get(ids[0]);
                r->get(ids[3]);
            }
            const auto batch_before = batch->metrics();
            const auto single_before = single->metrics();
            const auto got = batch->get_many(ids);
            for (auto id : ids) single->get(id);
            const auto b = delta(batch->metrics(), batch_before);
            const auto one_by_one = delta(single->metrics(), single_before);
            EXPECT_EQ(b, one_by_one) << "batch: " << to_string(batch->metrics())
                                     << "\nsingle: " << to_string(single->metrics());
            EXPECT_EQ(b.at("hits"), 1u);
            EXPECT_EQ(b.at("negative_hits"), 1u);
            EXPECT_EQ(b.at("misses"), 3u);
            EXPECT_EQ(b.at("hit.count"), 2u) << "every hit is timed, a cached not-found too";
            EXPECT_EQ(b.at("miss_load.count"), 3u) << "every miss is timed";
            ASSERT_EQ(got.size(), ids.size());
            EXPECT_EQ(got[2]->price, 3);
            EXPECT_FALSE(got[4]);
        }
    }
}

TEST_F(RepositoryTest, GetManyWorksUnderEveryStrategyAndLockMode) {
    for (std::string s : {"WriteThenDelete", "WriteThrough", "Lease"}) {
        for (auto mode : {LockMode::None, LockMode::Mutex, LockMode::ReadWrite}) {
            auto o = options(strategy_named(s));
            o.key_prefix = unique_key_prefix();
            o.lock_mode = mode;
            auto r = repo(o);
            auto a = product(10), b = product(20);
            auto missing = cleanup_.add(unique_id());
            r->get(a);
            auto got = r->get_many({a, b, missing});
            EXPECT_EQ(got[0]->price, 10) << s << " " << to_string(mode);
            EXPECT_EQ(got[1]->price, 20) << s << " " << to_string(mode);
            EXPECT_FALSE(got[2]) << s << " " << to_string(mode);
            EXPECT_EQ(cached_entry(r->key_of(b))->version, 1) << s << " " << to_string(mode);
        }
    }
}

TEST_F(RepositoryTest, AnEntryThatDoesNotDecodeIsAMissDeletedAndCounted) {
    auto r = repo(options());
    auto id = product(42);
    const auto key = r->key_of(id);
    for (std::string garbage : {std::string("garbage"), std::string("v1:{not json"), std::string("v1:{\"id\":1}"),
                                std::string("\x00\x01", 2)}) {
        redis().set(key, garbage);
        auto p = r->get(id);
        ASSERT_TRUE(p) << garbage;
        EXPECT_EQ(p->price, 42);
        auto entry = cached_entry(key);
        ASSERT_TRUE(entry);
        EXPECT_EQ(entry->kind, CacheEntry::Kind::Value) << "replaced by a good entry";
        redis().del({key});
    }
    EXPECT_EQ(r->metrics().decode_errors, 4u);
}

TEST_F(RepositoryTest, AnUndecodableEntryInABatchIsAMissToo) {
    auto r = repo(options());
    auto a = product(1), b = product(2);
    redis().set(r->key_of(a), "junk");
    auto got = r->get_many({a, b});
    EXPECT_EQ(got[0]->price, 1);
    EXPECT_EQ(got[1]->price, 2);
    EXPECT_EQ(r->metrics().decode_errors, 1u);
    EXPECT_EQ(cached_entry(r->key_of(a))->kind, CacheEntry::Kind::Value);
}

TEST_F(RepositoryTest, TtlJitterSpreadsExpiries) {
    auto o = options();
    o.ttl = 10s;
    o.ttl_jitter = 5s;
    auto r = repo(o);
    std::set<long long> seconds;
    for (int i = 0; i < 20; ++i) {
        auto id = product();
        r->get(id);
        auto ttl = cached_ttl(r->key_of(id));
        ASSERT_TRUE(ttl);
        EXPECT_GT(*ttl, 9s);
        EXPECT_LE(*ttl, 15s);
        seconds.insert(ttl->count() / 250);
    }
    EXPECT_GT(seconds.size(), 3u) << "expiries are spread, not all at once";
}

TEST_F(RepositoryTest, TtlBoundingCapsEveryEntry) {
    auto o = options(std::make_shared<TtlBounding>(2000ms, 500ms));
    o.ttl = std::chrono::hours(1);
    auto r = repo(o);
    auto id = product();
    auto missing = cleanup_.add(unique_id());
    r->get(id);
    r->get(missing);
    for (auto key : {r->key_of(id), r->key_of(missing)}) {
        auto ttl = cached_ttl(key);
        ASSERT_TRUE(ttl);
        EXPECT_LE(*ttl, 2000ms);
        EXPECT_GT(*ttl, 1000ms);
    }
}

// A second entity, in a table of its own, for the side-by-side test.
struct Account {
    std::int64_t id = 0;
    std::string owner;
    std::int64_t balance = 0;
};
void to_json(nlohmann::json& j, const Account& a) { j = {{"id", a.id}, {"owner", a.owner}, {"balance", a.balance}}; }
void from_json(const nlohmann::json& j, Account& a) {
    j.at("id").get_to(a.id);
    j.at("owner").get_to(a.owner);
    j.at("balance").get_to(a.balance);
}

TEST_F(RepositoryTest, TwoEntitiesWithDifferentStrategiesLiveSideBySide) {
    db().execute("CREATE TABLE IF NOT EXISTS strategies_test_accounts (id BIGINT PRIMARY KEY, owner VARCHAR(64) "
                 "NOT NULL, balance BIGINT NOT NULL, version BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB");
    Entity<Account> accounts;
    accounts.name = "account";
    accounts.table = "strategies_test_accounts";
    accounts.columns = {"owner", "balance"};
    accounts.from_row = [](const Row& r) {
        return Account{r.get<std::int64_t>("id"), r.get<std::string>("owner"), r.get<std::int64_t>("balance")};
    };
    accounts.to_columns = [](const Account& a) { return ColumnValues{{"owner", a.owner}, {"balance", a.balance}}; };
    accounts.id_of = [](const Account& a) { return a.id; };

    auto products = repo(options(std::make_shared<WriteThrough>()));
    CachedRepository<Account> account_repo(accounts, db(), redis(), options(std::make_shared<Lease>()));

    auto id = product(5);
    const std::int64_t account_id = unique_id();
    account_repo.insert(Account{account_id, "ada", 100});
    EXPECT_EQ(products->get(id)->price, 5);
    EXPECT_EQ(account_repo.get(account_id)->balance, 100);
    EXPECT_EQ(account_repo.key_of(account_id), prefix_ + "{account:" + std::to_string(account_id) + "}");

    products->update(id, [](Product& p) { p.price = 6; });
    account_repo.update(account_id, [](Account& a) { a.balance -= 30; });
    EXPECT_EQ(cached_entry(products->key_of(id))->version, db_version(id)) << "WriteThrough set the new value";
    EXPECT_FALSE(cached_entry(account_repo.key_of(account_id))) << "Lease deleted";
    EXPECT_EQ(account_repo.get(account_id)->balance, 70);
    EXPECT_EQ(products->get(id)->price, 6);
    EXPECT_TRUE(account_repo.remove(account_id));
}

TEST_F(RepositoryTest, WriteThroughCachesExactlyWhatAReaderWouldLoad) {
    auto r = repo(options(std::make_shared<WriteThrough>()));
    auto id = product(10);
    r->get(id);  // cached: a write-through set refreshes an entry, it never fills an empty key (B2)
    r->update(id, [](Product& p) { p.name = "renamed"; });
    auto entry = cached_entry(r->key_of(id));
    ASSERT_TRUE(entry);
    EXPECT_EQ(entry->version, db_version(id));
    auto from_cache = r->get(id);
    redis().del({r->key_of(id)});
    auto from_db = r->get(id);
    EXPECT_EQ(from_cache->name, from_db->name);
    EXPECT_EQ(from_cache->price, from_db->price);
    EXPECT_EQ(r->metrics().hits, 1u);
}

TEST_F(RepositoryTest, DelayedDoubleDeleteNeverMakesTheWriterSleep) {
    auto r = repo(options(std::make_shared<DelayedDoubleDelete>(2000ms)));
    auto id = product();
    auto start = std::chrono::steady_clock::now();
    r->update(id, [](Product& p) { p.price = 1; });
    EXPECT_LT(std::chrono::steady_clock::now() - start, 1000ms);
    // The delayed delete still runs.
    r->get(id);
    ASSERT_TRUE(cached_entry(r->key_of(id)));
    ASSERT_TRUE(r->settle(10s));
    EXPECT_FALSE(cached_entry(r->key_of(id)));
}

TEST_F(RepositoryTest, BadOptionsAndEntitiesAreConfigErrors) {
    auto o = options();
    o.ttl = 0ms;
    EXPECT_THROW(repo(o), ConfigError);
    o = options();
    o.lock_mode = LockMode::Mutex;
    o.lock_service = nullptr;
    EXPECT_THROW(repo(o), ConfigError);
    o = options();
    o.key_prefix = "{x}:";
    EXPECT_THROW(repo(o), ConfigError);
    auto e = product_entity();
    e.table = "products; DROP TABLE products";
    EXPECT_THROW(CachedRepository<Product>(e, db(), redis(), options()), ConfigError);
    e = product_entity();
    e.columns.push_back("version");
    EXPECT_THROW(CachedRepository<Product>(e, db(), redis(), options()), ConfigError);
    e = product_entity();
    e.from_row = nullptr;
    EXPECT_THROW(CachedRepository<Product>(e, db(), redis(), options()), ConfigError);
}

TEST_F(RepositoryTest, DbErrorsSurfaceTyped) {
    auto e = product_entity();
    e.table = "no_such_table";
    EXPECT_THROW(CachedRepository<Product>(e, db(), redis(), options()), ConfigError) << "checked at construction";
    // A table dropped after construction: the statements fail with the server's error.
    const std::string table = "strategies_test_dropped_" + std::to_string(getpid());
    db().execute("CREATE TABLE IF NOT EXISTS " + table + " LIKE products");
    e.table = table;
    CachedRepository<Product> r(e, db(), redis(), options());
    db().execute("DROP TABLE " + table);
    try {
        r.get(1);
        FAIL() << "expected DbError";
    } catch (const DbError& err) {
        EXPECT_EQ(err.code(), 1146);
    }
    EXPECT_THROW(r.update(1, [](Product&) {}), DbError);
}

// The in-memory Cache: the same repository logic without Redis (the store is emulated).
TEST_F(RepositoryTest, RunsOverTheInMemoryCacheToo) {
    auto memory = make_in_memory_cache();
    auto o = options(std::make_shared<Lease>());
    CachedRepository<Product> r(product_entity(), db(), make_cache_entry_store(*memory), o);
    auto id = product(9);
    EXPECT_EQ(r.get(id)->price, 9);
    EXPECT_EQ(r.get(id)->price, 9);
    EXPECT_EQ(r.metrics().hits, 1u);
    r.update(id, [](Product& p) { p.price = 10; });
    EXPECT_FALSE(memory->get(r.key_of(id)));
    EXPECT_EQ(r.get(id)->price, 10);
}

// A custom codec replaces JSON.
struct PipeCodec final : Codec<Product> {
    std::string encode(const Product& p) const override {
        return std::to_string(p.id) + "|" + p.name + "|" + std::to_string(p.price) + "|" + std::to_string(p.stock);
    }
    Product decode(std::string_view bytes) const override {
        std::vector<std::string> parts;
        std::string cur;
        for (char c : bytes) {
            if (c == '|') {
                parts.push_back(cur);
                cur.clear();
            } else {
                cur += c;
            }
        }
        parts.push_back(cur);
        if (parts.size() != 4) throw std::invalid_argument("not a pipe product");
        return Product{std::stoll(parts[0]), parts[1], std::stoll(parts[2]), std::stoi(parts[3])};
    }
};

TEST_F(RepositoryTest, TheCodecIsReplaceable) {
    auto e = product_entity();
    e.codec = std::make_shared<PipeCodec>();
    CachedRepository<Product> r(e, db(), redis(), options());
    auto id = product(77);
    r.get(id);
    auto entry = cached_entry(r.key_of(id));
    ASSERT_TRUE(entry);
    EXPECT_EQ(entry->payload, std::to_string(id) + "|product " + std::to_string(id) + "|77|10");
    EXPECT_EQ(r.get(id)->price, 77);
}

}  // namespace
}  // namespace lockstep::test
