// C12 (docs/races.md): a near cache misses its invalidation. The process holds v1 in its near
// cache (RepositoryOptions::near_cache), kept in step by Redis CLIENT TRACKING. Its subscriber
// connection is killed (CLIENT KILL) and held before it resubscribes (fault point
// "near.before_subscribe"); meanwhile another process's repository writes v2 and deletes the key:
// Redis sends the invalidation to a client that no longer exists. Without the drop rule
// (NearCacheOptions::drop_rule = false, demo only) the process serves v1 until the local TTL;
// with it the near cache was dropped when the channel broke, and the read gets v2.
#include <chrono>
#include <memory>
#include <thread>

#include "context.h"
#include "forced.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/cache/redis_near_cache.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/db/mysql_pool.h"
#include "product_repository.h"
#include "products.h"
#include "race_case.h"
#include "stats.h"

namespace lockstep::demo {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr const char* kScenario = "stale-cache";
const char* const kNoRule = "near cache without the drop rule";
const char* const kRule = "near cache, dropped when its channel breaks";
constexpr auto kLocalTtl = 10s;

// Reads `id` until the near cache holds it, every invalidation sent before applied; returns the
// price read. (The read after a miss may be refused its local fill: the miss's own fill of Redis
// is announced too. A message of our own on the channel, once counted, says every earlier one
// was applied: Redis delivers in order.)
std::int64_t hold_locally(RedisClient& redis, CachedRepository<Product>& repo, RedisNearCache& near, std::int64_t id) {
    const auto deadline = Clock::now() + 10s;
    while (Clock::now() < deadline) {
        const std::int64_t price = repo.get(id)->price;
        const auto before = near.channel().messages();
        redis.command({"PUBLISH", "__redis__:invalidate", repo.key_of(id) + ":sync"});
        while (near.channel().messages() == before && Clock::now() < deadline) std::this_thread::sleep_for(100us);
        if (near.local().stats().entries == 1) return price;
    }
    throw TimeoutError("C12: the near cache never held the entry");
}

Trial trial(DemoContext& ctx, bool drop_rule) {
    auto& db = ctx.services().db();
    auto& redis = ctx.services().redis();
    const std::int64_t id = ctx.new_ids();
    insert_product(db, id, 10);
    NearCacheOptions n;
    n.ttl = kLocalTtl;
    n.drop_rule = drop_rule;
    auto near = std::make_shared<RedisNearCache>(ctx.services().redis_options(), n);
    RepositoryOptions with_near = repository_options(ctx.services(), "WriteThenDelete", LockMode::None);
    with_near.near_cache = near;
    CachedRepository<Product> repo(product_entity(), db, redis, with_near);
    // The other process: its own connections, no near cache.
    CachedRepository<Product> other(product_entity(), db, redis,
                                    repository_options(ctx.services(), "WriteThenDelete", LockMode::None));
    const std::int64_t old_price = hold_locally(redis, repo, *near, id);

    Trial t;
    {
        fault::Gate resubscribe(10s);
        auto armed = fault::arm("near.before_subscribe", resubscribe.action());
        redis.command({"CLIENT", "KILL", "ID", std::to_string(near->channel().subscriber_id())});
        if (!resubscribe.wait_arrivals(1, 10s)) throw TimeoutError("C12: the subscriber did not try to reconnect");
        other.update(id, [](Product& p) { p.price += 100; });  // its invalidation is lost
        resubscribe.open();
    }
    const auto deadline = Clock::now() + 10s;
    while (!(near->channel().intact() && near->channel().connects() >= 2) && Clock::now() < deadline) {
        std::this_thread::sleep_for(1ms);
    }
    if (!near->channel().intact()) throw TimeoutError("C12: the subscriber did not come back");
    const std::int64_t read = repo.get(id)->price;
    const std::int64_t in_db = db_version(db, id).value_or(0);
    t.reproduced = read == old_price;
    t.evidence = t.reproduced ? "after the reconnect the near cache still serves price " + std::to_string(read) +
                                    " (the write's invalidation went to the dead subscriber); stale until its local TTL (" +
                                    fixed1(std::chrono::duration<double>(kLocalTtl).count()) + " s)"
                              : "the near cache was dropped when the channel broke; the read got price " +
                                    std::to_string(read) + " (database v" + std::to_string(in_db) + ")";
    const auto m = repo.metrics();
    t.metrics.push_back({"near_drops", static_cast<double>(m.near_drops)});
    t.metrics.push_back({"near_hits", static_cast<double>(m.near_hits)});
    t.metrics.push_back({"local_ttl_ms", static_cast<double>(std::chrono::milliseconds(kLocalTtl).count())});
    return t;
}

void forced(DemoContext& ctx, const RaceCase& c) {
    for (const bool drop_rule : {false, true}) {
        auto base = ctx.row(c, drop_rule ? kRule : kNoRule, Mode::Forced);
        if (!base) continue;
        record_forced(ctx, std::move(*base), [&](int) { return trial(ctx, drop_rule); });
    }
}

}  // namespace

void add_race_c12() {
    add_race({kScenario, "C12",
              "the near cache holds v1; the connection that carries its invalidations is killed and, while it is down, another process "
              "writes v2",
              {"R: reads v1 twice (the second read fills the near cache)",
               "server: CLIENT KILL of the near cache's subscriber; its resubscription held",
               "W (another process): writes v2 and deletes the key; Redis sends its invalidations nowhere",
               "R: reads again after the channel is back"},
              "",
              {{kNoRule, Mode::Forced, Outcome::Reproduced}, {kRule, Mode::Forced, Outcome::Prevented}},
              forced,
              {}});
}

}  // namespace lockstep::demo
