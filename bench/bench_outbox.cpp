// Outbox writer (docs/invalidation.md, C5): the latency of CachedRepository::update with the
// transactional outbox (RepositoryOptions::outbox: one INSERT into `outbox` inside the write's
// transaction; the row is pruned in batches off the write path) against the same update
// without it, call by call in one loop (paired.h). One `SELECT 1` is timed in the same loop: the
// cost of one statement round trip, which is what the outbox adds to every write.
#include <chrono>
#include <memory>
#include <string>

#include "families.h"
#include "lockstep/strategies/outbox.h"
#include "paired.h"
#include "repositories.h"

namespace lockstep::bench {

namespace {
constexpr const char* kBench = "outbox/paired";
}

void register_outbox(Environment& env, Plan& plan) {
    const Budget& b = env.budget();
    auto outbox = std::make_shared<Outbox>(env.db(), make_redis_entry_store(env.redis()), OutboxOptions{});
    RepositoryOptions o;
    o.strategy = std::make_shared<WriteThenDelete>();
    o.key_prefix = env.prefix();
    o.ttl = std::chrono::hours(1);
    o.ttl_jitter = std::chrono::milliseconds(0);
    o.outbox = outbox;
    auto with = std::make_shared<ProductRepository>(product_entity(), env.db(), env.redis(), o);
    auto without = make_repository(env, std::make_shared<WriteThenDelete>());
    const std::int64_t with_id = new_products(env, 1);
    const std::int64_t without_id = new_products(env, 1);
    MysqlPool* db = &env.db();

    benchmark::RegisterBenchmark(
        kBench,
        [=](benchmark::State& state) {
            auto bump = [](Product& p) { p.price += 1; };
            const std::vector<TimedOp> ops = {
                {"outbox", [&] { benchmark::DoNotOptimize(with->update(with_id, bump)); }},
                {"plain", [&] { benchmark::DoNotOptimize(without->update(without_id, bump)); }},
                {"stmt", [&] { benchmark::DoNotOptimize(db->query_one("SELECT 1")); }},
            };
            run_paired(state, ops);
            (void)outbox;  // kept alive: its thread prunes the done rows off the write path
        })
        ->Unit(benchmark::kMicrosecond)
        ->MinTime(b.latency_min_time * 2)
        ->Repetitions(b.latency_repetitions);

    plan.add(row_order::kOutbox, "outbox writer", "≤ 1.15×", {kBench}, [](const Results& r) {
        const MedianRepetition m(r, kBench, "outbox", "plain");
        TableRow row = paired_latency_row(m, "outbox", "plain", 1.15, "update with the outbox", "update without");
        const double ours = m.seconds("outbox");
        const double base = m.seconds("plain");
        const double stmt = m.seconds("stmt");
        row.notes = "difference " + micros(ours - base) + " = " + fixed((ours - base) / stmt, 2) +
                    " × one statement round trip (" + micros(stmt) + "); an update is 5 (BEGIN, SELECT ... FOR "
                    "UPDATE, UPDATE, re-read, COMMIT), the outbox adds the INSERT: 6/5 = 1.2× when round trips "
                    "dominate";
        row.data["one_statement_seconds"] = stmt;
        return row;
    });
}

}  // namespace lockstep::bench
