// Cache hit: CachedRepository::get of a cached product, envelope and JSON decode included,
// against a raw hiredis GET of the very same key (the same bytes come back), timed call by call
// in one loop (paired.h). Two more operations in the same loop split the difference for the
// notes: RedisClient::get of that key (the client layer alone) and the decode alone (envelope +
// JsonCodec, no network).
#include <memory>
#include <string>

#include "lockstep/strategies/binary_codec.h"
#include "families.h"
#include "paired.h"
#include "raw_redis.h"
#include "repositories.h"

namespace lockstep::bench {

namespace {
constexpr const char* kBench = "cache_hit/paired";
}

void register_cache_hit(Environment& env, Plan& plan) {
    const Budget& b = env.budget();
    auto repo = make_repository(env, std::make_shared<WriteThenDelete>());
    const std::int64_t id = new_products(env, 1);
    if (!repo->get(id)) throw Error("cache hit: product row missing");  // the miss fills the entry
    const std::string key = repo->key_of(id);
    const std::string bytes = env.redis().get(key).value_or("");
    if (!CacheEntry::decode(bytes)) throw Error("cache hit: the entry was not filled");
    // The key's own server (its slot's master on a cluster): the raw GET is one plain round trip.
    const RedisOptions options = raw_options_for_key(env.redis(), key);
    RedisClient* client = &env.redis();

    benchmark::RegisterBenchmark(
        kBench,
        [=](benchmark::State& state) {
            RawRedis raw(options);
            // What the repository's default codec is for Product (it lists its binary fields).
            BinaryCodec<Product> codec;
            const std::vector<TimedOp> ops = {
                {"ours", [&] { benchmark::DoNotOptimize(repo->get(id)); }},
                {"raw",
                 [&] {
                     benchmark::DoNotOptimize(raw.command({"GET", key})->len);
                 }},
                {"client", [&] { benchmark::DoNotOptimize(client->get(key)); }},
                {"decode",
                 [&] { benchmark::DoNotOptimize(codec.decode(CacheEntry::decode(bytes)->payload)); }},
            };
            const auto before = repo->metrics();
            run_paired(state, ops);
            if (repo->metrics().misses != before.misses)
                state.SkipWithError("a get missed the cache: not a hit benchmark");
        })
        ->Unit(benchmark::kMicrosecond)
        ->MinTime(b.latency_min_time)
        ->Repetitions(b.latency_repetitions);

    plan.add(row_order::kCacheHit, "cache hit", "≤ 1.05×", {kBench}, [bytes](const Results& r) {
        const MedianRepetition m(r, kBench, "ours", "raw");
        TableRow row = paired_latency_row(m, "ours", "raw", 1.05, "get", "raw GET");
        const double ours = m.seconds("ours");
        const double raw = m.seconds("raw");
        const double client = m.seconds("client");
        const double decode = m.seconds("decode");
        row.notes = std::to_string(bytes.size()) + "-byte entry; of the +" + micros(ours - raw) +
                    ": RedisClient::get " + micros(client - raw) + ", envelope + decode (default codec, BinaryCodec) " +
                    micros(decode) + ", rest of the repository path " + micros(ours - client - decode);
        if (row.verdict == Verdict::Missed) {
            row.notes += "; missed: 1.05× leaves " + micros(raw * 0.05) +
                         " over a GET here, and decoding the payload takes " +
                         micros(decode) + " by itself";
        }
        row.data["redis_client_get_seconds"] = client;
        row.data["decode_seconds"] = decode;
        row.data["entry_bytes"] = bytes.size();
        return row;
    });
}

}  // namespace lockstep::bench
