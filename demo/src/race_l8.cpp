// L8 (docs/races.md): failover loses the lock. A locks on the master; the master dies before the
// key reaches its replica; the replica is promoted; B locks on it. Both hold, both write.
//
// Forced on a private master + replica (LocalRedisReplication): replication is held back on
// purpose (the replica cannot re-authenticate after its link is cut), A takes the lock, the master
// is SIGKILLed, the replica promoted (REPLICAOF NO ONE), B takes the lock on it; then B writes,
// and A, who still believes it holds the lock, writes late. Each write adds 1 to a product's stock.
//   unprotected  both hold, both writes apply (stock 2);
//   WAIT         A's acquisition asks for 1 replica acknowledgement, gets 0, releases and fails:
//                only B ever holds (stock 1);
//   fencing      both hold, but the writes are fenced: A's older token is refused by MySQL after
//                B's newer one wrote (stock 1).
// Redlock (no majority for B) is the Redlock backend's row. Cost: each row measures its lock cycle
// and its write with replication up, so WAIT's price (a replica round trip) shows.
#include <chrono>
#include <optional>
#include <string>

#include "context.h"
#include "forced.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"
#include "lockstep/db/fenced_write.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/locks/lock_client.h"
#include "lockstep/locks/lock_errors.h"
#include "lockstep/locks/redis_mutex.h"
#include "lockstep/servers/local_redis_replication.h"
#include "products.h"
#include "race_case.h"
#include "stats.h"

namespace lockstep::demo {

namespace {

using namespace std::chrono_literals;

constexpr const char* kScenario = "lock-pitfalls";
const char* const kNone = "RedisMutex on a master with an async replica";
const char* const kWait = "RedisMutex + WAIT 1 replica after acquire";
const char* const kFence = "RedisMutex + fencing token checked by MySQL";
constexpr int kCostCycles = 50;  // lock cycles and writes measured per row

// One client process: its own RedisClient and lock client on the master it knows.
struct Client {
    Client(const RedisOptions& o, const std::string& prefix, bool wait) : redis(o), locks(redis, options(prefix, wait)) {}
    static LockClientOptions options(const std::string& prefix, bool wait) {
        LockClientOptions lo;
        lo.prefix = prefix;
        // A cut-off replica never acknowledges, whatever the timeout: a short one keeps the row fast.
        if (wait) lo.replication_wait = {.replicas = 1, .timeout = 100ms};
        return lo;
    }
    RedisClient redis;
    RedisLockClient locks;
};

// The write both holders make: one more unit of stock; fenced, it is refused for an older token.
bool write(MysqlPool& db, std::int64_t product, bool fenced, FenceToken token) {
    if (!fenced) {
        db.execute("UPDATE products SET stock = stock + 1 WHERE id = ?", {product});
        return true;
    }
    try {
        fenced_update(db, product, token, {.assignments = "stock = stock + 1", .table = "products"});
        return true;
    } catch (const ConflictError&) {
        return false;
    }
}

// What the row's protection costs, replication up: the mean lock cycle (try_lock + unlock) and
// the mean write, each over kCostCycles (after one warm-up cycle that opens the connections).
std::string cost_of(DemoContext& ctx, const std::string& protection, LocalRedisReplication& topology) {
    Client c(topology.master_options(), ctx.services().prefix(), protection == kWait);
    RedisMutex m(c.locks, ctx.unique("l8-cost"), {.lease = 30s});
    MysqlPool& db = ctx.services().db();
    const std::int64_t product = ctx.new_ids();
    insert_product(db, product, 0, "L8 cost");
    using Ms = std::chrono::duration<double, std::milli>;
    Ms lock{0}, written{0};
    for (int i = -1; i < kCostCycles; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        if (!m.try_lock()) throw ProtocolError("L8 cost: the lock was not free");
        auto t1 = std::chrono::steady_clock::now();
        write(db, product, protection == kFence, m.fence_token());
        auto t2 = std::chrono::steady_clock::now();
        m.unlock_checked();
        if (i < 0) continue;  // the warm-up cycle
        lock += (t1 - t0) + (std::chrono::steady_clock::now() - t2);
        written += t2 - t1;
    }
    return "lock cycle " + fixed2(lock.count() / kCostCycles) + " ms, write " + fixed2(written.count() / kCostCycles) +
           " ms";
}

Trial trial(DemoContext& ctx, const std::string& protection, LocalRedisReplication& topology) {
    const bool fenced = protection == kFence;
    MysqlPool& db = ctx.services().db();
    const std::int64_t product = ctx.new_ids();
    insert_product(db, product, 0, "L8 stock");
    const std::string name = ctx.unique("l8");

    Client a(topology.master_options(), ctx.services().prefix(), protection == kWait);
    RedisMutex ma(a.locks, name, {.lease = 30s});
    topology.hold_back_replication();
    bool a_holds = false;
    try {
        a_holds = ma.try_lock();
    } catch (const ReplicationWaitError&) {
        // WAIT: 0 of 1 replicas acknowledged; the hold was released again.
    }
    const FenceToken token_a = a_holds ? ma.fence_token() : 0;
    topology.fail_over();

    Client b(topology.replica_options(), ctx.services().prefix(), false);
    RedisMutex mb(b.locks, name, {.lease = 30s});
    const bool b_holds = mb.try_lock();
    const FenceToken token_b = b_holds ? mb.fence_token() : 0;

    // B writes, then A writes late: it still believes it holds the lock (its lease runs 30 s and
    // nothing told it its master is gone).
    const bool b_wrote = b_holds && write(db, product, fenced, token_b);
    const bool a_believes = a_holds && !ma.lost();
    const bool a_wrote = a_believes && write(db, product, fenced, token_a);
    const int stock = stock_of(db, product);
    if (b_holds) mb.unlock();
    if (a_holds) ma.unlock();  // its master is gone: reported, never thrown

    Trial t;
    t.reproduced = a_wrote && b_wrote && stock == 2;
    if (!a_holds) {
        t.evidence = "A's acquisition refused (0 of 1 replicas acknowledged); only B held: stock " + std::to_string(stock);
    } else if (a_wrote) {
        t.evidence = "A and B both held the lock and both wrote: stock " + std::to_string(stock);
    } else {
        t.evidence = "A and B both held; A's late write (token " + std::to_string(token_a) + ") refused after B's (" +
                     std::to_string(token_b) + "): stock " + std::to_string(stock);
    }
    t.metrics = {{"a_held", a_holds ? 1 : 0}, {"b_held", b_holds ? 1 : 0}, {"both_wrote", a_wrote && b_wrote ? 1 : 0},
                 {"stock", stock}};
    return t;
}

void forced(DemoContext& ctx, const RaceCase& c) {
    for (const char* p : {kNone, kWait, kFence}) {
        auto base = ctx.row(c, p, Mode::Forced);
        if (!base) continue;
        // One master + replica per row; after each run the killed master comes back as the
        // replica of the promoted one (heal), so a run costs a restart, not a new topology.
        std::optional<LocalRedisReplication> topology;
        try {
            topology.emplace();
            base->cost = cost_of(ctx, p, *topology);
        } catch (const std::exception& e) {
            base->cost = std::string("not measured: ") + e.what();
        }
        record_forced(ctx, std::move(*base), [&](int run) {
            if (!topology) throw ConnectionError("L8: the private master + replica did not start");
            if (run > 0) topology->heal();
            return trial(ctx, p, *topology);
        });
    }
}

}  // namespace

void add_race_l8() {
    add_race({kScenario, "L8",
              "replication to the replica held back, A locks on the master, the master is SIGKILLed and the "
              "replica promoted, B locks on it; B writes, then A writes late",
              {"A: locks on the master (its key never reaches the replica), writes last",
               "operator: SIGKILL of the master, REPLICAOF NO ONE on the replica",
               "B: locks on the promoted replica, writes"},
              "",
              {{kNone, Mode::Forced, Outcome::Reproduced},
               {kWait, Mode::Forced, Outcome::Prevented},
               {kFence, Mode::Forced, Outcome::Prevented}},
              forced, nullptr});
}

}  // namespace lockstep::demo
