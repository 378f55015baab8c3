// Codec: what decoding a cached product costs with BinaryCodec (strategies/binary_codec.h, the
// default for a type that lists its binary fields) against JsonCodec, next to a raw GET round
// trip of the same entry for scale, and a cache hit with each codec set explicitly.
//
// All in one paired loop (paired.h). A decode takes well under a microsecond, close to the
// clock's own cost, so each decode operation runs kBatch decodes and the row divides by it.
#include <memory>
#include <string>

#include "families.h"
#include "lockstep/strategies/binary_codec.h"
#include "paired.h"
#include "raw_redis.h"
#include "repositories.h"

namespace lockstep::bench {

namespace {
constexpr const char* kBench = "codec/paired";
constexpr int kBatch = 100;
}  // namespace

void register_codec(Environment& env, Plan& plan) {
    const Budget& b = env.budget();
    const std::int64_t id = new_products(env, 1);
    // The same repository twice, the codec set explicitly on each entity: JsonCodec (what a
    // user who wants readable entries picks) and BinaryCodec (the default for Product).
    RepositoryOptions jo;
    jo.strategy = std::make_shared<WriteThenDelete>();
    jo.key_prefix = env.prefix() + "json:";
    jo.ttl = std::chrono::hours(1);
    jo.ttl_jitter = std::chrono::milliseconds(0);
    Entity<Product> json_entity = product_entity();
    json_entity.codec = std::make_shared<JsonCodec<Product>>();
    auto json_repo = std::make_shared<ProductRepository>(json_entity, env.db(), env.redis(), std::move(jo));
    RepositoryOptions o;
    o.strategy = std::make_shared<WriteThenDelete>();
    o.key_prefix = env.prefix() + "bin:";
    o.ttl = std::chrono::hours(1);
    o.ttl_jitter = std::chrono::milliseconds(0);
    Entity<Product> entity = product_entity();
    entity.codec = std::make_shared<BinaryCodec<Product>>();
    auto bin_repo = std::make_shared<ProductRepository>(entity, env.db(), env.redis(), std::move(o));
    if (!json_repo->get(id) || !bin_repo->get(id)) throw Error("codec: product row missing");
    const std::string json_key = json_repo->key_of(id);
    const std::string json_payload = CacheEntry::decode(env.redis().get(json_key).value_or(""))->payload;
    const auto bin_entry = CacheEntry::decode(env.redis().get(bin_repo->key_of(id)).value_or(""));
    if (!bin_entry) throw Error("codec: the binary entry was not filled");
    const std::string bin_payload = bin_entry->payload;
    // The key's own server (its slot's master on a cluster): the raw GET is one plain round trip.
    const RedisOptions options = raw_options_for_key(env.redis(), json_key);

    benchmark::RegisterBenchmark(
        kBench,
        [=](benchmark::State& state) {
            RawRedis raw(options);
            JsonCodec<Product> json;
            BinaryCodec<Product> binary;
            const std::vector<TimedOp> ops = {
                {"raw", [&] { benchmark::DoNotOptimize(raw.command({"GET", json_key})->len); }},
                {"json_get", [&] { benchmark::DoNotOptimize(json_repo->get(id)); }},
                {"binary_get", [&] { benchmark::DoNotOptimize(bin_repo->get(id)); }},
                {"json_decode",
                 [&] {
                     for (int i = 0; i < kBatch; ++i) benchmark::DoNotOptimize(json.decode(json_payload));
                 }},
                {"binary_decode",
                 [&] {
                     for (int i = 0; i < kBatch; ++i) benchmark::DoNotOptimize(binary.decode(bin_payload));
                 }},
            };
            run_paired(state, ops);
        })
        ->Unit(benchmark::kMicrosecond)
        ->MinTime(b.latency_min_time)
        ->Repetitions(b.latency_repetitions);

    const auto json_size = json_payload.size();
    const auto bin_size = bin_payload.size();
    plan.add(row_order::kCodec, "codec decode, micro (BinaryCodec vs JsonCodec)", "shown", {kBench},
             [json_size, bin_size](const Results& r) {
                 const MedianRepetition m(r, kBench, "binary_decode", "json_decode");
                 const double bin = m.seconds("binary_decode") / kBatch;
                 const double json = m.seconds("json_decode") / kBatch;
                 const double raw = m.seconds("raw");
                 TableRow row;
                 row.ours = fixed(bin * 1e9, 0) + " ns decode";
                 row.baseline = fixed(json * 1e9, 0) + " ns JSON decode";
                 row.ratio = times(m.ratio());
                 row.verdict = Verdict::Shown;
                 row.notes = "one product: " + std::to_string(bin_size) + "-byte binary payload, " +
                             std::to_string(json_size) + "-byte JSON; binary decode is " + fixed(bin / raw * 100, 2) +
                             "% of a raw GET round trip (" + micros(raw) + " in the same loop), JSON " +
                             fixed(json / raw * 100, 1) + "%";
                 row.data = {{"ratio", m.ratio()},
                             {"binary_decode_seconds", bin},
                             {"json_decode_seconds", json},
                             {"raw_get_seconds", raw},
                             {"binary_payload_bytes", bin_size},
                             {"json_payload_bytes", json_size}};
                 return row;
             });
    plan.add(row_order::kCodec + 1, "cache hit with BinaryCodec (entity.codec set)", "shown", {kBench},
             [](const Results& r) {
                 const MedianRepetition m(r, kBench, "binary_get", "raw");
                 TableRow row = paired_latency_row(m, "binary_get", "raw", 1.05, "get", "raw GET");
                 row.verdict = Verdict::Shown;
                 const double json_get = m.seconds("json_get");
                 const double raw = m.seconds("raw");
                 row.notes = "the same repository path with entity.codec = BinaryCodec<Product>; the JsonCodec "
                             "repository in the same loop: " +
                             micros(json_get) + " (" + times(json_get / raw) +
                             "); the cache-hit row judges the default (BinaryCodec for Product)";
                 row.data["json_get_seconds"] = json_get;
                 return row;
             });
}

}  // namespace lockstep::bench
