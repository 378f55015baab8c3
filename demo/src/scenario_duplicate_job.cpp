// duplicate-job (docs/races.md O2): N nodes run the scheduled job "close unpaid orders older than two
// hours and give their units back to stock" at the same moment.
//
// The job, as the source documents write it: select the expired unpaid orders, then for each
// one mark it closed and add its quantity back to the product's stock. Without a lock every node
// selects the same orders and restores their units: stock is restored N times. With a job lock
// taken by try-lock (wait 0, RedisMutex::try_lock) only the node that got it runs the round.
//
// Forced: every node first decides (takes the lock or not), all meet, then every node that runs
// reads the expired orders, and they meet again before anyone closes one: the worst case, every
// run. Load: --iterations/10 rounds with new expired orders each, nodes meeting only at the start
// of each round ("the same minute"), no other forcing.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "context.h"
#include "forced.h"
#include "lockstep/core/error.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/db/transaction.h"
#include "lockstep/locks/redis_mutex.h"
#include "products.h"
#include "scenarios.h"
#include "stats.h"
#include "workers.h"

namespace lockstep::demo {

namespace {

constexpr const char* kScenario = "duplicate-job";
constexpr int kInitialStock = 100;
constexpr int kExpiredOrders = 5;
constexpr int kUnitsPerOrder = 2;
constexpr int kUnitsExpired = kExpiredOrders * kUnitsPerOrder;
constexpr auto kMeetTimeout = std::chrono::seconds(30);

// A product whose stock already lacks the units of its expired unpaid orders.
void prepare_round(MysqlPool& db, std::int64_t product) {
    insert_product(db, product, kInitialStock, "job item");
    for (int i = 0; i < kExpiredOrders; ++i) {
        db.execute(
            "INSERT INTO orders (product_id, quantity, status, created_at) VALUES (?, ?, 'unpaid', NOW(3) - INTERVAL 3 HOUR)",
            {product, kUnitsPerOrder});
    }
    // One recent unpaid order that the job must leave alone.
    db.execute("INSERT INTO orders (product_id, quantity, status) VALUES (?, 1, 'unpaid')", {product});
}

struct JobRun {
    bool ran = false;
    long long closed = 0;
    long long restored = 0;
};

// The job of the source documents, closing one product's expired orders (one product per round
// keeps rounds independent). `after_read` is where the forced run makes the runners meet.
JobRun close_unpaid_orders(MysqlPool& db, std::int64_t product, const std::function<void()>& after_read) {
    JobRun run;
    run.ran = true;
    auto expired = db.query(
        "SELECT id, quantity FROM orders WHERE product_id = ? AND status = 'unpaid' AND created_at < NOW(3) - INTERVAL 2 HOUR",
        {product});
    after_read();
    for (const auto& order : expired) {
        Transaction tx(db);
        tx.execute("UPDATE orders SET status = 'closed' WHERE id = ?", {order.get<std::int64_t>("id")});
        tx.execute("UPDATE products SET stock = stock + ? WHERE id = ?", {order.get<int>("quantity"), product});
        tx.commit();
        ++run.closed;
        run.restored += order.get<int>("quantity");
    }
    return run;
}

// Worker role "duplicate-job.node": runs `rounds` rounds of the job, one product per round.
nlohmann::json node(Worker& w) {
    const auto& args = w.args;
    const bool locked = args["guard"].get<std::string>() == "lock";
    const bool forced = args["forced"].get<bool>();
    const int nodes = args["nodes"].get<int>();
    const int rounds = args["rounds"].get<int>();
    const auto first_product = args["product"].get<std::int64_t>();
    const std::string tag = args["tag"].get<std::string>();
    auto& sig = w.services.signals();
    int ran = 0;
    long long closed = 0, restored = 0;
    for (int r = 0; r < rounds; ++r) {
        const auto product = first_product + r;
        const std::string round = tag + ":" + std::to_string(r);
        if (w.index == 0) prepare_round(w.services.db(), product);
        // "At the same minute": every node starts the round together.
        if (!sig.rendezvous(round + ":start", nodes, kMeetTimeout)) throw TimeoutError("nodes did not meet at " + round);
        std::unique_ptr<RedisMutex> lock;
        bool run = true;
        if (locked) {
            lock = std::make_unique<RedisMutex>(w.services.locks(), "job:close-unpaid:" + std::to_string(product));
            run = lock->try_lock();  // wait 0: a node that does not get it skips this round
        }
        std::function<void()> after_read = [] {};
        if (forced) {
            if (run) sig.add(round + ":runners", 1);
            // Everyone has decided; a lock holder still holds its lock here.
            if (!sig.rendezvous(round + ":decided", nodes, kMeetTimeout)) throw TimeoutError("nodes did not decide");
            const int runners = static_cast<int>(sig.add(round + ":runners", 0));
            after_read = [&sig, round, runners] {
                if (!sig.rendezvous(round + ":read", runners, kMeetTimeout)) throw TimeoutError("runners did not meet");
            };
        }
        if (run) {
            JobRun j = close_unpaid_orders(w.services.db(), product, after_read);
            ++ran;
            closed += j.closed;
            restored += j.restored;
        }
        if (lock && run) lock->unlock();
        if (!sig.rendezvous(round + ":end", nodes, kMeetTimeout)) throw TimeoutError("nodes did not finish " + round);
    }
    return {{"ran", ran}, {"closed", closed}, {"restored", restored}};
}

int node_count(const DemoOptions& o) { return std::max(2, o.processes > 0 ? o.processes : o.threads); }

struct Totals {
    long long expected_stock = 0;
    long long stock = 0;
    long long ran = 0;
    long long closed_updates = 0;
    long long rounds_over = 0;  // rounds whose stock was restored more than once
};

Totals run_rounds(DemoContext& ctx, const std::string& guard, bool forced, int rounds) {
    const int nodes = node_count(ctx.options());
    const auto product = ctx.new_ids(rounds);
    nlohmann::json args = {{"guard", guard}, {"forced", forced}, {"nodes", nodes}, {"rounds", rounds},
                           {"product", product}, {"tag", ctx.unique("job")}};
    auto results = run_workers(ctx, std::vector<WorkerSpec>(nodes, WorkerSpec{"duplicate-job.node", args}));
    Totals t;
    for (const auto& r : results) {
        t.ran += r["ran"].get<long long>();
        t.closed_updates += r["closed"].get<long long>();
    }
    auto& db = ctx.services().db();
    for (int r = 0; r < rounds; ++r) {
        int stock = stock_of(db, product + r);
        t.stock += stock;
        t.expected_stock += kInitialStock + kUnitsExpired;
        if (stock > kInitialStock + kUnitsExpired) ++t.rounds_over;
    }
    return t;
}

std::string guard_label(const std::string& guard) {
    return guard == "lock" ? "job lock (RedisMutex try_lock, wait 0)" : "none";
}

Trial forced_trial(DemoContext& ctx, const std::string& guard) {
    const int nodes = node_count(ctx.options());
    Totals t = run_rounds(ctx, guard, true, 1);
    const long long restored = t.stock - kInitialStock;
    Trial trial;
    trial.reproduced = restored > kUnitsExpired;
    trial.evidence = std::to_string(t.ran) + " of " + std::to_string(nodes) + " nodes ran the job; " +
                     std::to_string(kUnitsExpired) + " expired units restored " +
                     fixed1(static_cast<double>(restored) / kUnitsExpired) + "x (stock " + std::to_string(t.stock) +
                     ", expected " + std::to_string(t.expected_stock) + ")";
    trial.metrics = {{"nodes", nodes},
                     {"nodes_ran", static_cast<double>(t.ran)},
                     {"units_expired", kUnitsExpired},
                     {"units_restored", static_cast<double>(restored)},
                     {"stock", static_cast<double>(t.stock)},
                     {"expected_stock", static_cast<double>(t.expected_stock)}};
    return trial;
}

void load_run(DemoContext& ctx, const std::string& guard, Result r) {
    const int nodes = node_count(ctx.options());
    const int rounds = std::max(2, ctx.options().iterations / 10);
    ctx.progress(std::string(kScenario) + ": load, " + guard_label(guard) + ": " + std::to_string(nodes) +
                 " nodes, " + std::to_string(rounds) + " rounds");
    auto t0 = std::chrono::steady_clock::now();
    Totals t = run_rounds(ctx, guard, false, rounds);
    double seconds = ms_between(t0, std::chrono::steady_clock::now()) / 1000;
    const long long extra = t.stock - t.expected_stock;
    r.observed = t.rounds_over > 0 ? Outcome::Reproduced : Outcome::Prevented;
    r.evidence = std::to_string(t.rounds_over) + " of " + std::to_string(rounds) + " rounds restored stock more than once (" +
                 std::to_string(extra) + " units created from nothing); job ran " + fixed1(static_cast<double>(t.ran) / rounds) +
                 "x per round";
    r.cost = fixed1(seconds * 1000 / rounds) + " ms per round (" + std::to_string(nodes) + " nodes)";
    r.metric("nodes", nodes)
        .metric("rounds", rounds)
        .metric("rounds_restored_more_than_once", static_cast<double>(t.rounds_over))
        .metric("units_created", static_cast<double>(extra))
        .metric("job_runs", static_cast<double>(t.ran))
        .metric("ms_per_round", seconds * 1000 / rounds);
    ctx.add(std::move(r));
}

const char* const kGuards[] = {"none", "lock"};

void o2_forced(DemoContext& ctx, const RaceCase& c) {
    for (const std::string guard : kGuards) {
        if (auto base = ctx.row(c, guard_label(guard), Mode::Forced)) {
            record_forced(ctx, std::move(*base), [&](int) { return forced_trial(ctx, guard); });
        }
    }
}

void o2_load(DemoContext& ctx, const RaceCase& c) {
    for (const std::string guard : kGuards) {
        if (auto r = ctx.row(c, guard_label(guard), Mode::Load)) load_run(ctx, guard, std::move(*r));
    }
}

}  // namespace

void add_duplicate_job() {
    add_scenario({kScenario,
                  "N nodes run \"close unpaid orders and restore their stock\" at once; unprotected the "
                  "stock is restored N times, with a try-lock job lock exactly once",
                  {}});
    roles()["duplicate-job.node"] = node;
}

void add_race_o2() {
    RaceCase c{kScenario, "O2",
               "N nodes start the same job at the same moment; each reads the expired orders before any restores",
               {"node 1..N: reads the unpaid orders older than 2 h, meets the others, restores their units"},
               "--iterations/10 rounds of the job on N nodes; rounds that restored stock more than once, ms per round",
               {}, o2_forced, o2_load};
    for (Mode mode : {Mode::Forced, Mode::Load}) {
        for (const std::string guard : kGuards) {
            c.rows.push_back({guard_label(guard), mode, guard == "lock" ? Outcome::Prevented : Outcome::Reproduced});
        }
    }
    add_race(std::move(c));
}

}  // namespace lockstep::demo
