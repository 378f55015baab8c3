// C10 (docs/races.md): a backfill from a lagging replica. The repository reads misses from a
// MariaDB replica (RepositoryOptions::read_replica). The lag is forced: the replica's SQL thread
// is stopped, so it receives the primary's binlog but applies nothing. W commits v2 on the
// primary and deletes the key; R misses, reads v1 from the replica and caches it. After the
// replica catches up the cache still says v1: stale until its TTL.
//
// Closed by the "recently written" marker (strategies/src/replica_reads.h): W marks the key
// before its COMMIT and R's miss of a marked key reads the primary. Or by a BinlogInvalidator
// following the replica's own binlog: the old fill stays only until the replica applies the
// write (then the follower deletes it), so the cache is never staler than the replica itself.
//
// The replica: the one the demo started next to its private primary, or (with --mysql) a
// private primary + replica pair of this case's own.
#include <chrono>
#include <memory>
#include <random>
#include <thread>

#include "context.h"
#include "forced.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"
#include "lockstep/core/uri.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/servers/demo_schema.h"
#include "lockstep/invalidation/binlog_invalidator.h"
#include "lockstep/servers/local_servers.h"
#include "product_repository.h"
#include "products.h"
#include "race_case.h"
#include "stats.h"

namespace lockstep::demo {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr const char* kScenario = "invalidation";
const char* const kNone = "read replica, no marker";
const char* const kMarker = "read replica + recently-written marker (10 s)";
const char* const kFollower = "read replica + follower of the replica's binlog";
constexpr auto kFollowerBound = 5s;

// The primary and its replica.
struct Pair {
    std::unique_ptr<LocalServers> own;  // set when this case started its own pair
    std::unique_ptr<MysqlPool> primary_pool;  // null: the demo's own pool is the primary
    std::unique_ptr<MysqlPool> replica;
    MysqlOptions replica_options;
    MysqlPool* primary = nullptr;
};

Pair& pair(DemoContext& ctx) {
    static Pair p = [&] {
        Pair q;
        if (!ctx.services().endpoints().mysql_replica_url.empty()) {
            q.primary = &ctx.services().db();
            q.replica_options = parse_mysql_url(ctx.services().endpoints().mysql_replica_url);
        } else {
            ctx.progress(std::string(kScenario) + ": C10 starts a private mariadbd primary and replica");
            LocalServersOptions o;
            o.redis = false;
            o.use_environment = false;
            o.mysql_replica = true;
            q.own = std::make_unique<LocalServers>(o);
            q.primary_pool = std::make_unique<MysqlPool>(q.own->mysql_options());
            lockstep::testing::bootstrap_demo_schema(*q.primary_pool);
            q.primary = q.primary_pool.get();
            q.replica_options = q.own->mysql_replica_options();
        }
        q.replica = std::make_unique<MysqlPool>(q.replica_options);
        return q;
    }();
    return p;
}

// Blocks until the replica applied everything the primary committed so far.
void wait_for_replica(Pair& p) {
    const auto pos = p.primary->query_one("SELECT @@gtid_binlog_pos AS pos", {})->get<std::string>("pos");
    const auto waited = p.replica->query_one("SELECT MASTER_GTID_WAIT(?, 30) AS w", {pos})->get<std::int64_t>("w");
    if (waited != 0) throw TimeoutError("the replica did not apply " + pos + " within 30 s");
}

void sql_thread(Pair& p, bool run) {
    auto c = p.replica->acquire();
    c->execute_unprepared(run ? "START SLAVE SQL_THREAD" : "STOP SLAVE SQL_THREAD");
}

Trial trial(DemoContext& ctx, Pair& p, const char* protection) {
    auto& redis = ctx.services().redis();
    const std::int64_t id = ctx.new_ids();
    insert_product(*p.primary, id, 10);
    wait_for_replica(p);
    if (!db_version(*p.replica, id)) throw Error("the replica has not applied the insert of product " + std::to_string(id));
    RepositoryOptions o = repository_options(ctx.services(), "WriteThenDelete", LockMode::None);
    o.read_replica = p.replica.get();
    o.recent_write_window = protection == kMarker ? 10s : 0ms;
    CachedRepository<Product> repo(product_entity(), *p.primary, redis, o);
    const std::string key = repo.key_of(id);

    std::unique_ptr<BinlogInvalidator> follower;
    if (protection == kFollower) {
        BinlogInvalidatorOptions fo;
        std::random_device rd;
        fo.name = ctx.unique("c10-replica-follower");
        fo.server_id = 100000u + rd() % 1000000000u;
        fo.heartbeat = 100ms;
        fo.read_timeout = 2s;
        fo.flush_on_fresh_start = false;
        follower = std::make_unique<BinlogInvalidator>(
            p.replica_options, redis,
            InvalidationMap({{.table = "products", .entity = "product", .prefix = ctx.services().prefix()}}), fo);
        follower->start();
        follower->wait_caught_up(10s);
    }

    sql_thread(p, false);  // the forced lag
    Trial t;
    try {
        repo.update(id, [](Product& x) { x.price += 100; });  // v2 on the primary, key deleted
        repo.get(id);                                           // the miss, and its backfill
    } catch (...) {
        sql_thread(p, true);
        throw;
    }
    const auto filled = cached_version(redis, key);
    sql_thread(p, true);
    wait_for_replica(p);  // the replica has v2 now
    if (follower) {
        const auto t0 = Clock::now();
        while (redis.command({"EXISTS", key}).integer() == 1 && Clock::now() - t0 < kFollowerBound) {
            std::this_thread::sleep_for(50us);
        }
        t.evidence = "replica's follower deleted the v" + std::to_string(filled.value_or(0)) + " fill; ";
    }
    const auto cached = cached_version(redis, key);
    const auto in_db = db_version(*p.primary, id).value_or(0);
    const long long ttl_ms = redis.command({"PTTL", key}).integer();
    t.reproduced = cached && *cached > 0 && *cached < in_db;
    const auto m = repo.metrics();
    t.evidence += "miss read the " + std::string(m.primary_loads_recent > 0 ? "primary (key marked)" : "replica") +
                  "; after the replica caught up the cache " +
                  (t.reproduced ? "still serves v" + std::to_string(*cached) + " (database v" + std::to_string(in_db) +
                                      "), stale until its TTL (" + fixed1(static_cast<double>(ttl_ms) / 1000) + " s)"
                                : std::string(cached ? "holds v" + std::to_string(*cached) : "holds nothing") +
                                      ", database v" + std::to_string(in_db));
    t.metrics = {{"cached_version", cached ? static_cast<double>(*cached) : -1},
                 {"db_version", static_cast<double>(in_db)},
                 {"replica_loads", static_cast<double>(m.replica_loads)},
                 {"primary_loads_recent", static_cast<double>(m.primary_loads_recent)},
                 {"ttl_left_ms", static_cast<double>(ttl_ms)}};
    if (follower) follower->stop();
    return t;
}

void forced(DemoContext& ctx, const RaceCase& c) {
    for (const char* protection : {kNone, kMarker, kFollower}) {
        auto base = ctx.row(c, protection, Mode::Forced);
        if (!base) continue;
        Pair& p = pair(ctx);
        record_forced(ctx, std::move(*base), [&](int) { return trial(ctx, p, protection); });
    }
}

}  // namespace

void add_race_c10() {
    add_race({kScenario, "C10",
              "the repository reads misses from a replica whose SQL thread is stopped; W commits v2 on the primary "
              "and deletes the key; R misses and backfills from the replica",
              {"W: updates through the repository (primary), deleting the key",
               "R: misses, loads from the replica (or the primary when the key is marked), backfills",
               "follower (last row): reads the replica's binlog, deletes the key once the replica applied v2"},
              "",
              {{kNone, Mode::Forced, Outcome::Reproduced},
               {kMarker, Mode::Forced, Outcome::Prevented},
               {kFollower, Mode::Forced, Outcome::Prevented}},
              forced,
              {}});
}

}  // namespace lockstep::demo
