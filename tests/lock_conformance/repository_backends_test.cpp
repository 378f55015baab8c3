// The repository over every lock backend: one option (RepositoryOptions::lock_service) switches
// its per-key locks from Redis to fair Redis, MySQL, ZooKeeper or memory. Writers and readers of
// one key run together in each lock mode the backend has; afterwards the cache must agree with
// the database, and every write must have landed. Over ZooKeeper, the session also expires twice
// mid-run (a waiter must never miss its wake-up across it). (A smoke test that the repository runs over
// each backend; the forced C1-C4 interleavings are tests/strategies' race matrix, over Redis.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "backends.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/servers/demo_schema.h"
#include "lockstep/strategies/cached_repository.h"
#include "test_servers.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

struct Item {
    std::int64_t id = 0;
    std::string name;
    std::int64_t price = 0;
    int stock = 0;
};

void to_json(nlohmann::json& j, const Item& p) {
    j = nlohmann::json{{"id", p.id}, {"name", p.name}, {"price", p.price}, {"stock", p.stock}};
}
void from_json(const nlohmann::json& j, Item& p) {
    p.id = j.at("id").get<std::int64_t>();
    p.name = j.at("name").get<std::string>();
    p.price = j.at("price").get<std::int64_t>();
    p.stock = j.at("stock").get<int>();
}

Entity<Item> item_entity() {
    Entity<Item> e;
    e.name = "item";
    e.table = "products";
    e.columns = {"name", "price", "stock"};
    e.from_row = [](const Row& r) {
        return Item{r.get<std::int64_t>("id"), r.get<std::string>("name"), r.get<std::int64_t>("price"), r.get<int>("stock")};
    };
    e.to_columns = [](const Item& p) { return ColumnValues{{"name", p.name}, {"price", p.price}, {"stock", p.stock}}; };
    e.id_of = [](const Item& p) { return p.id; };
    return e;
}

struct MemoryB { static constexpr const char* name = "memory"; };
struct RedisB { static constexpr const char* name = "redis"; };
struct RedisFairB { static constexpr const char* name = "redis-fair"; };
struct MysqlB { static constexpr const char* name = "mysql"; };
struct ZooKeeperB { static constexpr const char* name = "zookeeper"; };

template <class B>
class RepositoryOverBackend : public ::testing::Test {};
struct Name {
    template <class B>
    static std::string GetName(int) {
        return backend_test_name(B::name);
    }
};
using Backends = ::testing::Types<MemoryB, RedisB, RedisFairB, MysqlB, ZooKeeperB>;
TYPED_TEST_SUITE(RepositoryOverBackend, Backends, Name);

TYPED_TEST(RepositoryOverBackend, WritersAndReadersOfOneKeyLeaveTheCacheFresh) {
    if (backend_url(TypeParam::name).empty()) GTEST_SKIP() << TypeParam::name << " is not available here";
    auto mysql = servers().mysql_options();
    mysql.pool_size = 16;
    MysqlPool db(mysql);
    lockstep::testing::bootstrap_demo_schema(db);
    auto redis_options = servers().redis_options();
    redis_options.pool_size = 32;
    RedisClient redis(redis_options);
    static std::atomic<int> n{0};
    const std::int64_t id = 900000000 + (::getpid() % 10000) * 100 + n.fetch_add(1) * 3;
    const std::string prefix = "rb" + std::to_string(::getpid()) + "_" + std::to_string(id) + ":";
    auto service = open_backend(TypeParam::name, prefix);
    for (auto mode : {LockMode::Mutex, LockMode::ReadWrite}) {
        if (mode == LockMode::ReadWrite && !service->supports_read_write()) continue;
        const std::int64_t key = id + (mode == LockMode::Mutex ? 0 : 1);
        db.execute("REPLACE INTO products (id, name, price, stock, version) VALUES (?, 'x', 100, 0, 1)", {key});
        RepositoryOptions o;
        o.key_prefix = prefix;
        o.lock_mode = mode;
        o.lock_service = service.get();
        o.lock_wait = 30s;
        CachedRepository<Item> a(item_entity(), db, redis, o), b(item_entity(), db, redis, o);
        constexpr int kWrites = 15;
        std::vector<std::thread> threads;
        for (auto* repo : {&a, &b}) {
            threads.emplace_back([repo, key] {
                for (int i = 0; i < kWrites; ++i) {
                    try {
                        repo->update(key, [](Item& p) { p.stock += 1; });
                    } catch (const std::exception& e) {
                        ADD_FAILURE() << "update failed: " << e.what();
                    }
                }
            });
            threads.emplace_back([repo, key] {
                for (int i = 0; i < 2 * kWrites; ++i) ASSERT_TRUE(repo->get(key));
            });
        }
        if (std::string(TypeParam::name) == "zookeeper") {
            // Two session expiries while the writers run, at known points (after 5 and 15 landed
            // writes): every hold and queued waiter of the service loses its node at once, the
            // holders' losses are reported, the waiters queue again in one new session. (Two
            // waiters that both saw the expiry once opened a session each and leaked one, with
            // its queue node: every later waiter then timed out.)
            for (int landed : {5, 15}) {
                const auto until = std::chrono::steady_clock::now() + 60s;
                while (db.query_one("SELECT stock FROM products WHERE id = ?", {key})->template get<int>("stock") <
                           landed &&
                       std::chrono::steady_clock::now() < until) {
                    std::this_thread::sleep_for(5ms);
                }
                force_loss(TypeParam::name, *service, prefix, "");
            }
        }
        for (auto& t : threads) t.join();
        ASSERT_TRUE(a.settle(10s));
        ASSERT_TRUE(b.settle(10s));
        const int in_db = db.query_one("SELECT stock FROM products WHERE id = ?", {key})->template get<int>("stock");
        EXPECT_EQ(in_db, 2 * kWrites) << to_string(mode) << ": a write was lost";
        EXPECT_EQ(a.get(key)->stock, in_db) << to_string(mode) << ": the cache disagrees with the database";
        db.execute("DELETE FROM products WHERE id = ?", {key});
        redis.del({a.key_of(key)});
    }
}

}  // namespace
}  // namespace lockstep::test
