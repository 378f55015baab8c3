// C9 (docs/races.md): a writer that bypasses the library. The entry holds v1; a plain UPDATE on a
// connection of its own (another service, a migration, an operator) commits v2. No library code
// runs, so nothing deletes the key: stale until its TTL. A BinlogInvalidator following the
// primary's binlog (invalidation/) sees the row change, whoever made it, and deletes the key;
// the row reports how long that took (COMMIT returned -> key gone).
#include <chrono>
#include <random>
#include <thread>

#include "context.h"
#include "forced.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/invalidation/binlog_invalidator.h"
#include "lockstep/invalidation/position_store.h"
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
constexpr auto kFollowerBound = 5s;

// A replica id no other follower of this server uses (MariaDB evicts a second dump connection
// registering with the same id).
std::uint32_t follower_server_id() {
    std::random_device rd;
    return 100000u + rd() % 1000000000u;
}

Trial trial(DemoContext& ctx, bool follower) {
    auto& db = ctx.services().db();
    auto& redis = ctx.services().redis();
    const std::int64_t id = ctx.new_ids();
    insert_product(db, id, 10);
    CachedRepository<Product> repo(product_entity(), db, redis,
                                   repository_options(ctx.services(), "WriteThenDelete", LockMode::None));
    repo.get(id);  // cached: v1
    const std::string key = repo.key_of(id);
    // The bypassing writer: one plain statement, no repository, no outbox.
    db.execute("UPDATE products SET price = price + 100, version = version + 1 WHERE id = ?", {id});
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
    t.reproduced = cached && *cached > 0 && *cached < in_db;
    t.evidence += t.reproduced ? "cache serves v" + std::to_string(*cached) + ", database has v" + std::to_string(in_db) +
                                     ", stale until its TTL (" + fixed1(static_cast<double>(ttl_ms) / 1000) + " s)"
                               : "cache holds no old version (database v" + std::to_string(in_db) + ")";
    t.metrics.push_back({"cached_version", cached ? static_cast<double>(*cached) : -1});
    t.metrics.push_back({"db_version", static_cast<double>(in_db)});
    t.metrics.push_back({"ttl_left_ms", static_cast<double>(ttl_ms)});
    return t;
}

void forced(DemoContext& ctx, const RaceCase& c) {
    for (const bool with_follower : {false, true}) {
        auto base = ctx.row(c, with_follower ? kFollower : kNone, Mode::Forced);
        if (!base) continue;
        std::unique_ptr<BinlogInvalidator> follower;
        const std::string name = ctx.unique("c9-follower");
        if (with_follower) {
            BinlogInvalidatorOptions o;
            o.name = name;
            o.server_id = follower_server_id();
            o.heartbeat = 100ms;
            o.read_timeout = 2s;
            o.flush_on_fresh_start = false;  // the demo's other keys are not ours to flush
            follower = std::make_unique<BinlogInvalidator>(
                ctx.services().mysql_options(), ctx.services().redis(),
                InvalidationMap({{.table = "products", .entity = "product", .prefix = ctx.services().prefix()}}), o);
            follower->start();
            follower->wait_caught_up(10s);
        }
        record_forced(ctx, std::move(*base), [&](int) { return trial(ctx, with_follower); });
        if (follower) {
            follower->stop();
            // Its saved position goes too (the store opens a pool of its own: position_store.h).
            PositionStore(ctx.services().mysql_options()).erase(name);
        }
    }
}

}  // namespace

void add_race_c9() {
    add_race({kScenario, "C9",
              "the cache holds v1; a plain UPDATE on a connection of its own (no library code) commits v2",
              {"W: UPDATE products SET price = ..., version = version + 1 (another service)",
               "follower: reads the primary's binlog as a replica and deletes the changed row's key"},
              "",
              {{kNone, Mode::Forced, Outcome::Reproduced}, {kFollower, Mode::Forced, Outcome::Prevented}},
              forced,
              {}});
}

}  // namespace lockstep::demo
