// inventory_service: a small, complete service on its own schema, as a new user would write it.
//
//   accounts   AUTO_INCREMENT id, a DB-managed `updated_at` (ON UPDATE CURRENT_TIMESTAMP) and a
//              DB-managed `tier` (DEFAULT): cached with Lease, no lock (reads never wait)
//   inventory  stock per SKU, cached with WriteThrough under a per-key Mutex; stock is taken with
//              a fenced update: a paused holder's late write is refused by the database
//
// Servers: LOCKSTEP_REDIS_URL and LOCKSTEP_MYSQL_URL if set (e.g. redis://127.0.0.1:6379/0 and
// mysql://root@127.0.0.1:3306/shop), otherwise a private redis-server and mariadbd are started
// on free loopback ports (lockstep::LocalServers) and removed at exit.
//
// It exits 0 when every check passed, and prints the repositories' metrics (latency histograms
// included) at the end.
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "lockstep/cache/redis_client.h"
#include "lockstep/db/db.h"
#include "lockstep/locks/lock_client.h"
#include "lockstep/locks/redis_lock_service.h"
#include "lockstep/locks/redis_mutex.h"
#include "lockstep/servers/local_servers.h"
#include "lockstep/strategies/strategies.h"

namespace shop {

struct Account {
    std::int64_t id = 0;
    std::string owner;
    std::int64_t balance_cents = 0;
    std::string tier;        // DB-managed (DEFAULT 'basic')
    std::string updated_at;  // DB-managed (ON UPDATE CURRENT_TIMESTAMP)
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Account, id, owner, balance_cents, tier, updated_at)

struct Item {
    std::int64_t sku = 0;
    std::string title;
    std::int64_t stock = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Item, sku, title, stock)

void create_schema(lockstep::MysqlPool& db) {
    db.execute(R"sql(CREATE TABLE IF NOT EXISTS accounts (
        id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
        owner VARCHAR(64) NOT NULL,
        balance_cents BIGINT NOT NULL,
        tier VARCHAR(16) NOT NULL DEFAULT 'basic',
        updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
        version BIGINT NOT NULL DEFAULT 0
    ) ENGINE=InnoDB)sql");
    db.execute(R"sql(CREATE TABLE IF NOT EXISTS inventory (
        sku BIGINT NOT NULL PRIMARY KEY,
        title VARCHAR(128) NOT NULL,
        stock BIGINT NOT NULL,
        version BIGINT NOT NULL DEFAULT 0,
        fence BIGINT NOT NULL DEFAULT 0
    ) ENGINE=InnoDB)sql");
}

lockstep::Entity<Account> account_entity() {
    lockstep::Entity<Account> e;
    e.name = "account";
    e.table = "accounts";
    e.columns = {"owner", "balance_cents"};
    e.read_only_columns = {"tier", "updated_at"};
    e.from_row = [](const lockstep::Row& r) {
        return Account{r.get<std::int64_t>("id"), r.get<std::string>("owner"), r.get<std::int64_t>("balance_cents"),
                       r.get<std::string>("tier"), r.get<std::string>("updated_at")};
    };
    e.to_columns = [](const Account& a) {
        return lockstep::ColumnValues{{"owner", a.owner}, {"balance_cents", a.balance_cents}};
    };
    e.id_of = [](const Account& a) { return a.id; };
    return e;
}

lockstep::Entity<Item> item_entity() {
    lockstep::Entity<Item> e;
    e.name = "item";
    e.table = "inventory";
    e.key_column = "sku";
    e.columns = {"title", "stock"};
    e.fence_column = "fence";
    e.from_row = [](const lockstep::Row& r) {
        return Item{r.get<std::int64_t>("sku"), r.get<std::string>("title"), r.get<std::int64_t>("stock")};
    };
    e.to_columns = [](const Item& i) { return lockstep::ColumnValues{{"title", i.title}, {"stock", i.stock}}; };
    e.id_of = [](const Item& i) { return i.sku; };
    return e;
}

int failures = 0;
void check(bool ok, const std::string& what) {
    std::cout << (ok ? "ok    " : "FAIL  ") << what << "\n";
    if (!ok) ++failures;
}

}  // namespace shop

int main() {
    using namespace shop;
    try {
        lockstep::LocalServers servers;  // private servers unless LOCKSTEP_*_URL are set
        lockstep::MysqlPool db(servers.mysql_options());
        lockstep::RedisClient redis(servers.redis_options());
        lockstep::RedisLockClient locks(redis);
        lockstep::RedisLockService lock_service(locks);
        create_schema(db);

        lockstep::RepositoryOptions account_options;
        account_options.strategy = std::make_shared<lockstep::Lease>();
        lockstep::CachedRepository<Account> accounts(account_entity(), db, redis, account_options);

        lockstep::RepositoryOptions item_options;
        item_options.strategy = std::make_shared<lockstep::WriteThrough>();
        item_options.lock_mode = lockstep::LockMode::Mutex;
        item_options.lock_service = &lock_service;
        lockstep::CachedRepository<Item> items(item_entity(), db, redis, item_options);

        // Accounts: the database chooses the id and fills the DB-managed columns.
        Account ada = accounts.insert(Account{0, "ada", 10'000, "", ""});
        check(ada.id > 0, "insert returned the AUTO_INCREMENT id " + std::to_string(ada.id));
        check(ada.tier == "basic", "insert returned the DB default tier '" + ada.tier + "'");
        auto cached = accounts.get(ada.id);  // miss: loads and caches
        check(cached && cached->owner == "ada", "get after insert");
        auto paid = accounts.update(ada.id, [](Account& a) { a.balance_cents -= 2'500; });
        check(paid && paid->balance_cents == 7'500, "update returned the stored balance");
        check(accounts.get(ada.id)->updated_at == paid->updated_at, "a reader sees the DB-managed timestamp");

        // Inventory: a fenced stock update under the item's own lock.
        const std::int64_t sku = 4711;
        db.execute("DELETE FROM inventory WHERE sku = ?", {sku});
        items.insert(Item{sku, "teapot", 3});
        check(items.get(sku)->stock == 3, "stock cached");
        std::int64_t token = 0;
        {
            lockstep::RedisMutex stock_lock(locks, "stock:" + std::to_string(sku));
            std::unique_lock hold(stock_lock);
            token = stock_lock.fence_token();
            auto sold = items.update_fenced(sku, token, [](Item& i) { i.stock -= 1; });
            check(sold && sold->stock == 2, "fenced update took one from stock");
            hold.unlock();
        }
        try {
            items.update_fenced(sku, token - 1, [](Item& i) { i.stock -= 1; });
            check(false, "a stale token must be refused");
        } catch (const lockstep::ConflictError& e) {
            check(true, std::string("stale token refused: ") + e.what());
        }
        check(items.get(sku)->stock == 2, "the cache agrees with the database after the refused write");

        std::cout << "\naccounts: " << lockstep::to_string(accounts.metrics()) << "\n"
                  << lockstep::latency_report(accounts.metrics()) << "items: " << lockstep::to_string(items.metrics())
                  << "\n"
                  << lockstep::latency_report(items.metrics());
        // The lock client's own histograms (every lock of this client, docs/metrics.md).
        const lockstep::LockClientStats lock_stats = locks.stats();
        std::cout << "locks: acquired=" << lock_stats.acquired << " losses=" << lock_stats.losses << "\n"
                  << "acquire_latency: " << lockstep::to_string(lock_stats.acquire_latency) << "\n"
                  << "hold_time: " << lockstep::to_string(lock_stats.hold_time) << "\n";
    } catch (const lockstep::Error& e) {
        std::cerr << "inventory_service: " << e.what() << "\n";
        return 2;
    }
    std::cout << (failures == 0 ? "inventory_service: all checks passed\n" : "inventory_service: FAILED\n");
    return failures == 0 ? 0 : 1;
}
