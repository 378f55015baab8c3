// The demo's cached entity: a product row read through a CachedRepository<Product>, and the
// strategies and lock modes the stale-cache, stampede and penetration scenarios compare.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/strategies/strategies.h"
#include "services.h"

namespace lockstep::demo {

struct Product {
    std::int64_t id = 0;
    std::string name;
    std::int64_t price = 0;
    int stock = 0;
    // The row version it was read at (not written: the repository bumps it).
    std::int64_t version = 0;
};
void to_json(nlohmann::json& j, const Product& p);
void from_json(const nlohmann::json& j, Product& p);

Entity<Product> product_entity();

// A strategy by its table name: "WriteThenDelete", "DelayedDoubleDelete", "TtlBounding",
// "WriteThrough", "Lease", "DeleteThenCommit", "WriteThenSet" (the last two demo-only).
struct StrategyInfo {
    std::string name;
    std::string label;  // for tables
    bool demo_only;
};
const std::vector<StrategyInfo>& strategy_infos();
std::shared_ptr<const WriteStrategy> make_strategy(const std::string& name);

// The delay of DelayedDoubleDelete and the bound of TtlBounding used throughout the demo.
inline constexpr std::chrono::milliseconds kDoubleDeleteDelay{100};
inline constexpr std::chrono::milliseconds kTtlBound{2000};

LockMode lock_mode_named(const std::string& name);

// Options the scenarios share: `ttl` for values, no jitter, generous waits so that a forced
// interleaving never turns into a timeout.
RepositoryOptions repository_options(Services& services, const std::string& strategy, LockMode mode,
                                     std::chrono::milliseconds ttl = std::chrono::seconds(60));

// What the cache holds for `key`: nullopt when nothing usable (no key, a marker); 0 for a cached
// "not found"; otherwise the version of the cached value.
std::optional<std::int64_t> cached_version(RedisClient& redis, const std::string& key);
// The row's version in the database (nullopt: no row).
std::optional<std::int64_t> db_version(MysqlPool& db, std::int64_t id);

}  // namespace lockstep::demo
