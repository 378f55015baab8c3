// C9 (docs/races.md): a writer that bypasses the library. The entry holds v1; a plain UPDATE on a
// connection of its own (another service, a migration, an operator) commits new content. No
// library code runs, so nothing deletes the key: stale until its TTL. A BinlogInvalidator
// following the primary's binlog (invalidation/) sees the row change, whoever made it, and deletes
// the key; the row reports how long that took (COMMIT returned -> key gone). The UPDATE either
// bumps `version` or leaves it alone (as most outside writers do): the second is judged by
// content, the way the ConsistencyInspector compares an entry with its row (inspected_entity.h).
#include <chrono>
#include <thread>

#include "context.h"
#include "demo_follower.h"
#include "forced.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/invalidation/inspected_entity.h"
#include "lockstep/strategies/cache_entry.h"
#include "product_repository.h"
#include "products.h"
#include "race_case.h"
#include "stats.h"

namespace lockstep::demo {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr const char* kScenario = "invalidation";
const char* const kNone = "WriteThenDelete, no follower";
const char* const kFollower = "WriteThenDelete + binlog follower";
const char* const kNoneSameVersion = "WriteThenDelete, no follower, UPDATE leaves version alone";
const char* const kFollowerSameVersion = "WriteThenDelete + binlog follower, UPDATE leaves version alone";
constexpr auto kFollowerBound = 5s;

// Whether the cached value's content differs from the committed row's (the inspector's rule).
bool content_differs(DemoContext& ctx, const std::string& key, std::int64_t id) {
    const auto bytes = ctx.services().redis().get(key);
    if (!bytes) return false;
    const auto entry = CacheEntry::decode(*bytes);
    if (!entry || entry->kind != CacheEntry::Kind::Value) return false;
    const InspectedEntity inspected = inspected_entity(product_entity(), ctx.services().prefix());
    std::string select = "SELECT " + inspected.key_column + ", " + inspected.version_column;
    for (const auto& c : inspected.columns) select += ", " + c;
    select += " FROM " + inspected.table + " WHERE " + inspected.key_column + " = ?";
    const auto row = ctx.services().db().query_one(select, {id});
    return row && inspected.compare(entry->payload, *row) == InspectedEntity::Content::Differs;
}

Trial trial(DemoContext& ctx, bool follower, bool same_version) {
    auto& db = ctx.services().db();
    auto& redis = ctx.services().redis();
    const std::int64_t id = ctx.new_ids();
    insert_product(db, id, 10);
    CachedRepository<Product> repo(product_entity(), db, redis,
                                   repository_options(ctx.services(), "WriteThenDelete", LockMode::None));
    repo.get(id);  // cached: v1
    const std::string key = repo.key_of(id);
    // The bypassing writer: one plain statement, no repository, no outbox.
    db.execute(same_version ? "UPDATE products SET price = price + 100 WHERE id = ?"
                            : "UPDATE products SET price = price + 100, version = version + 1 WHERE id = ?",
               {id});
    const auto committed = Clock::now();
    Trial t;
    if (follower) {
        // The follower's lag: poll until the key is gone (or the bound passes: then it is stale).
        while (redis.command({"EXISTS", key}).integer() == 1 && Clock::now() - committed < kFollowerBound) {
            std::this_thread::sleep_for(50us);
        }
        const double lag_ms = std::chrono::duration<double, std::milli>(Clock::now() - committed).count();
        t.metrics.push_back({"follower_lag_ms", lag_ms});
        t.evidence = "key deleted " + fixed2(lag_ms) + " ms after the UPDATE returned; ";
    }
    const auto cached = cached_version(redis, key);
    const auto in_db = db_version(db, id).value_or(0);
    const long long ttl_ms = redis.command({"PTTL", key}).integer();
    const std::string ttl = " (" + fixed1(static_cast<double>(ttl_ms) / 1000) + " s)";
    if (same_version) {
        t.reproduced = content_differs(ctx, key, id);
        t.evidence += t.reproduced ? "cache serves v" + std::to_string(in_db) +
                                         " with other content than the row's v" + std::to_string(in_db) +
                                         " (same version), stale until its TTL" + ttl
                                   : "cache holds nothing that differs from the row";
    } else {
        t.reproduced = cached && *cached > 0 && *cached < in_db;
        t.evidence += t.reproduced ? "cache serves v" + std::to_string(*cached) + ", database has v" +
                                         std::to_string(in_db) + ", stale until its TTL" + ttl
                                   : "cache holds no old version (database v" + std::to_string(in_db) + ")";
    }
    t.metrics.push_back({"cached_version", cached ? static_cast<double>(*cached) : -1});
    t.metrics.push_back({"db_version", static_cast<double>(in_db)});
    t.metrics.push_back({"ttl_left_ms", static_cast<double>(ttl_ms)});
    return t;
}

void forced(DemoContext& ctx, const RaceCase& c) {
    for (const bool same_version : {false, true}) {
        for (const bool with_follower : {false, true}) {
            const char* label = same_version ? (with_follower ? kFollowerSameVersion : kNoneSameVersion)
                                             : (with_follower ? kFollower : kNone);
            auto base = ctx.row(c, label, Mode::Forced);
            if (!base) continue;
            std::unique_ptr<DemoFollower> follower;
            if (with_follower) follower = std::make_unique<DemoFollower>(ctx, ctx.unique("c9-follower"));
            record_forced(ctx, std::move(*base), [&](int) { return trial(ctx, with_follower, same_version); });
        }
    }
}

}  // namespace

void add_race_c9() {
    add_race({kScenario, "C9",
              "the cache holds v1; a plain UPDATE on a connection of its own (no library code) commits new "
              "content, with or without a version bump",
              {"W: UPDATE products SET price = ... [, version = version + 1] (another service)",
               "follower: reads the primary's binlog as a replica and deletes the changed row's key"},
              "",
              {{kNone, Mode::Forced, Outcome::Reproduced},
               {kFollower, Mode::Forced, Outcome::Prevented},
               {kNoneSameVersion, Mode::Forced, Outcome::Reproduced},
               {kFollowerSameVersion, Mode::Forced, Outcome::Prevented}},
              forced,
              {}});
}

}  // namespace lockstep::demo
