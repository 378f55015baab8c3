// Near cache (docs/near-cache.md): a near hit, a near miss and a raw GET timed call by call in
// one loop (paired.h), with the plain repository hit as the near miss's baseline:
//   - near hit ÷ raw GET of the same key: the hit never leaves the process (target ≥ 20× faster);
//   - near miss ÷ plain repository hit: the tracked GET replaces the ordinary one and fills the
//     local entry (target ≤ 1.05×). Forced every call: the near cache holds one entry and the
//     loop alternates two ids, so each get evicts the other's entry;
//   - memory per near entry over its payload: glibc heap in use before and after filling N
//     entries of one payload size (shown).
#include <malloc.h>

#include <memory>
#include <string>

#include "families.h"
#include "lockstep/cache/redis_near_cache.h"
#include "paired.h"
#include "raw_redis.h"
#include "repositories.h"

namespace lockstep::bench {

namespace {
constexpr const char* kPaired = "near_cache/paired";
constexpr const char* kMemory = "near_cache/memory";
constexpr int kMemoryEntries = 10000;

std::shared_ptr<ProductRepository> near_repository(Environment& env, std::shared_ptr<RedisNearCache> near) {
    RepositoryOptions o;
    o.key_prefix = env.prefix();
    o.ttl = std::chrono::hours(1);
    o.ttl_jitter = std::chrono::milliseconds(0);
    o.near_cache = std::move(near);
    return std::make_shared<ProductRepository>(product_entity(), env.db(), env.redis(), std::move(o));
}
}  // namespace

void register_near_cache(Environment& env, Plan& plan) {
    const Budget& b = env.budget();
    auto plain = make_repository(env, std::make_shared<WriteThenDelete>());
    const std::int64_t first = new_products(env, 3);
    const std::int64_t hot = first, a = first + 1, c = first + 2;
    for (auto id : {hot, a, c}) {
        if (!plain->get(id)) throw Error("near cache: product row missing");  // fills Redis
    }
    NearCacheOptions big;
    big.ttl = std::chrono::hours(1);
    auto near = std::make_shared<RedisNearCache>(env.redis_options(), big);
    auto near_repo = near_repository(env, near);
    NearCacheOptions one;
    one.max_entries = 1;
    one.ttl = std::chrono::hours(1);
    auto tiny = std::make_shared<RedisNearCache>(env.redis_options(), one);
    auto miss_repo = near_repository(env, tiny);
    near_repo->get(hot);  // the tracked GET fills the near cache
    if (near_repo->metrics().near_entries != 1) throw Error("near cache: the hot entry was not filled");
    const std::string key = near_repo->key_of(hot);
    const RedisOptions options = raw_options_for_key(env.redis(), key);

    // Which of the two ids the next near miss reads: kept across the benchmark's runs, so the
    // first call of a run does not read the id the last call of the previous run left cached.
    auto turn = std::make_shared<std::uint64_t>(0);
    benchmark::RegisterBenchmark(
        kPaired,
        [=](benchmark::State& state) {
            RawRedis raw(options);
            const std::vector<TimedOp> ops = {
                {"near_hit", [&] { benchmark::DoNotOptimize(near_repo->get(hot)); }},
                {"raw", [&] { benchmark::DoNotOptimize(raw.command({"GET", key})->len); }},
                {"near_miss",
                 [&] {
                     benchmark::DoNotOptimize(miss_repo->get((++*turn % 2) != 0 ? a : c));
                 }},
                {"plain_hit", [&] { benchmark::DoNotOptimize(plain->get(hot)); }},
            };
            const auto before = near_repo->metrics();
            const auto miss_before = miss_repo->metrics();
            run_paired(state, ops);
            const auto after = near_repo->metrics();
            if (after.near_misses != before.near_misses) state.SkipWithError("a near hit missed: not a hit benchmark");
            const auto miss_after = miss_repo->metrics();
            // What went wrong, if a check below fails.
            state.counters["near_miss_local_hits"] = static_cast<double>(miss_after.near_hits - miss_before.near_hits);
            state.counters["near_miss_redis_misses"] = static_cast<double>(miss_after.misses - miss_before.misses);
            if (miss_after.near_hits != miss_before.near_hits) state.SkipWithError("the near-miss loop hit locally");
            if (miss_after.misses != miss_before.misses) state.SkipWithError("the near-miss loop missed Redis");
        })
        ->Unit(benchmark::kMicrosecond)
        ->MinTime(b.latency_min_time)
        ->Repetitions(b.latency_repetitions);

    benchmark::RegisterBenchmark(kMemory, [](benchmark::State& state) {
        for (auto _ : state) {
            for (const std::size_t payload : {64u, 1024u}) {
                NearCache local({.max_entries = kMemoryEntries + 1, .max_bytes = std::size_t{1} << 30});
                const std::string value(payload, 'x');
                const std::size_t h0 = mallinfo2().uordblks;
                for (int i = 0; i < kMemoryEntries; ++i) {
                    const std::string k = "ls:{product:" + std::to_string(1000000 + i) + "}";
                    local.fill(k, local.begin_fill(k), 1, value);
                }
                const double per = (static_cast<double>(mallinfo2().uordblks) - static_cast<double>(h0)) / kMemoryEntries;
                state.counters["bytes_per_entry_" + std::to_string(payload)] = per;
                state.counters["accounted_per_entry_" + std::to_string(payload)] =
                    static_cast<double>(local.stats().bytes) / kMemoryEntries;
            }
            state.SetIterationTime(1);
        }
    })
        ->Iterations(1)
        ->UseManualTime()
        ->Repetitions(1);

    plan.add(row_order::kNearHit, "near cache hit", "≥ 20× faster than a raw GET; p50 ≤ 1 µs", {kPaired},
             [](const Results& r) {
                 const MedianRepetition m(r, kPaired, "near_hit", "raw");
                 const double hit = m.seconds("near_hit");
                 const double raw = m.seconds("raw");
                 TableRow row;
                 row.ours = micros(hit) + " get (near hit)";
                 row.baseline = micros(raw) + " raw GET";
                 row.ratio = times(m.ratio());
                 const double faster = raw / hit;
                 row.verdict = faster >= 20 && hit <= 1e-6 ? Verdict::Met : Verdict::Missed;
                 row.notes = fixed(faster, 1) + "× faster than the round trip; median per call (p50) of the median "
                             "repetition; includes the envelope-free payload decode (default codec)";
                 row.data = {{"near_hit_seconds", hit}, {"raw_seconds", raw}, {"times_faster", faster}};
                 return row;
             });
    plan.add(row_order::kNearHit + 1, "near cache miss", "≤ 1.05× the plain repository hit", {kPaired},
             [](const Results& r) {
                 const MedianRepetition m(r, kPaired, "near_miss", "plain_hit");
                 TableRow row = paired_latency_row(m, "near_miss", "plain_hit", 1.05, "get (near miss)",
                                                   "get (plain hit)");
                 row.notes = "a tracked GET in place of the ordinary one, the local lookup, and the fill (an eviction "
                             "each call: one entry, two ids)";
                 return row;
             });
    plan.add(row_order::kNearHit + 2, "memory: near cache entry", "shown", {kMemory}, [](const Results& r) {
        const double small = r.counter(kMemory, "bytes_per_entry_64");
        const double large = r.counter(kMemory, "bytes_per_entry_1024");
        TableRow row;
        row.ours = fixed(small - 64, 0) + " B over a 64-byte payload";
        row.baseline = fixed(large - 1024, 0) + " B over a 1024-byte payload";
        row.ratio = "";
        row.verdict = Verdict::Shown;
        row.notes = "glibc heap in use per entry (" + std::to_string(kMemoryEntries) +
                    " entries, key \"ls:{product:<7 digits>}\" counted in the overhead); the byte bound counts " +
                    fixed(r.counter(kMemory, "accounted_per_entry_64") - 64, 0) + " B per 64-byte entry";
        row.data = {{"bytes_per_entry_64", small}, {"bytes_per_entry_1024", large}};
        return row;
    });
}

}  // namespace lockstep::bench
