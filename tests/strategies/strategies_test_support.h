// Shared by the strategies tests: the Product entity, one set of clients per test process
// (MySQL pool, Redis client, lock client) on the private servers, unique ids and key prefixes,
// direct looks at the database and at the raw cache entries, and Actor, a thread that runs one
// side of a forced interleaving.
//
// Multi-process tests re-execute this binary with LOCKSTEP_STRATEGIES_CHILD naming a role
// (child_roles.cpp handles it in a static initializer, before gtest's main).
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "lockstep/cache/redis_client.h"
#include "lockstep/db/db.h"
#include "lockstep/locks/lock_client.h"
#include "lockstep/locks/redis_lock_service.h"
#include "lockstep/servers/child_process.h"
#include "lockstep/strategies/strategies.h"

namespace lockstep::test {

struct Product {
    std::int64_t id = 0;
    std::string name;
    std::int64_t price = 0;
    int stock = 0;
};
void to_json(nlohmann::json& j, const Product& p);
void from_json(const nlohmann::json& j, Product& p);

Entity<Product> product_entity();

// The clients of this test process, created on first use. Redis/MySQL options come from the
// private servers (or LOCKSTEP_*_URL) with pools large enough for the stampede tests.
RedisOptions strategies_redis_options();
MysqlOptions strategies_mysql_options();
MysqlPool& db();
RedisClient& redis();
RedisLockClient& locks();
// A RedisLockService over locks(): what RepositoryOptions::lock_service takes.
RedisLockService& lock_service();

// A key prefix no other test uses, without braces (the entity's tag must stay the hash tag).
std::string unique_key_prefix();
// Product ids no other test, binary or run is using: <pid> * 10^6 + <counter>.
std::int64_t unique_id();

// Inserts a product row directly (not through a repository) at `version`.
void insert_product(std::int64_t id, std::int64_t price, std::int64_t version = 1, int stock = 10);
// The row's version and price in the database, read directly.
std::optional<std::int64_t> db_version(std::int64_t id);
std::optional<std::int64_t> db_price(std::int64_t id);
void delete_products(const std::vector<std::int64_t>& ids);

// The raw bytes under `key` in Redis, decoded (nullopt: no key). A key holding bytes that do not
// decode fails the test.
std::optional<CacheEntry> cached_entry(const std::string& key);
// PTTL of `key`, nullopt if absent.
std::optional<std::chrono::milliseconds> cached_ttl(const std::string& key);

// What the cache says about a row, compared with the database.
enum class Freshness {
    Fresh,  // no entry, a marker, or an entry at the database's version (or "not found" for no row)
    Stale,  // an entry older than the database (or "not found" for a row that exists)
};
Freshness freshness(const std::string& key, std::int64_t id);
const char* to_string(Freshness f);

// Deletes the ids' rows (and nothing else) at the end of a test.
class ProductCleanup {
public:
    ~ProductCleanup() { delete_products(ids_); }
    std::int64_t add(std::int64_t id) {
        ids_.push_back(id);
        return id;
    }

private:
    std::vector<std::int64_t> ids_;
};

// One actor of a forced interleaving, on its own thread. `body` runs at once; an exception
// escaping it is reported by join() as a test failure.
class Actor {
public:
    explicit Actor(std::string name, std::function<void()> body);
    ~Actor();
    Actor(const Actor&) = delete;
    Actor& operator=(const Actor&) = delete;

    bool done() const { return done_->load(); }
    bool wait_done(std::chrono::milliseconds timeout) const;
    void join();
    const std::string& name() const { return name_; }

private:
    std::string name_;
    std::shared_ptr<std::atomic<bool>> done_;
    std::shared_ptr<std::exception_ptr> error_;
    std::thread thread_;
};

// Waits until `actor` finished, or is waiting for a key lock (the repository's lock_waits grew
// past `lock_waits_before`). Fails the test after `timeout`.
enum class ActorState { Done, BlockedOnLock, TimedOut };
ActorState wait_done_or_blocked(const Actor& actor, const std::function<std::uint64_t()>& lock_waits,
                                std::uint64_t lock_waits_before, std::chrono::milliseconds timeout);

// Arms `point` with `gate` for the calling thread only, once.
fault::Arming arm_for_this_thread(std::string_view point, const fault::Gate& gate);

// "WriteThenDelete", "DelayedDoubleDelete:<ms>", "TtlBounding:<ms>", "WriteThrough", "Lease",
// -> the strategy (for parameters and child processes).
std::shared_ptr<const WriteStrategy> strategy_named(const std::string& name);
LockMode lock_mode_named(const std::string& name);

// --- child processes --------------------------------------------------------------------------

// This binary re-executed as `role` (LOCKSTEP_STRATEGIES_CHILD), with the servers' URLs
// (LOCKSTEP_STRATEGIES_REDIS, _MYSQL) and then `env` added. The parent reads its stdout in lines;
// one thread uses a Child at a time (lockstep::testing::ChildProcess).
class Child : public lockstep::testing::ChildProcess {
public:
    Child(const std::string& role, const std::map<std::string, std::string>& env);
};

}  // namespace lockstep::test
