// The scale family's memory curve (lockstep-bench --scale): Redis memory per cached entry as the
// cache grows to 1M entries, against a raw SET of the same payload.
//
//   ours      1M entries as the repository writes them: the entry envelope (CacheEntry) around
//             the BinaryCodec payload of a product, under the repository's key, with its TTL
//   baseline  1M raw SETs of the same payload bytes, without the envelope, under the same keys,
//             with the same TTL (an entry with no TTL would save the expires dict's share, which
//             the repository never does: every entry expires)
//
// Each is written alone into a Redis holding only the bench's other keys, measured as the growth
// of INFO's used_memory, and deleted (DEL, not UNLINK: the memory must be free before the next
// set is measured) before the other: after one set written and deleted unmeasured, ours, raw,
// raw, ours, each figure the mean of its two. The sizes 10k and 1M show whether the per-entry cost stays
// flat as the keyspace's hash tables grow. Only on the bench's private redis-server: on a shared
// server the figure would count other clients' keys, and 1M entries are not the bench's to add.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "families.h"
#include "lockstep/core/error.h"
#include "lockstep/strategies/binary_codec.h"
#include "lockstep/strategies/cache_entry.h"
#include "repositories.h"

namespace lockstep::bench {

namespace {

constexpr const char* kBench = "scale/entry_memory";
constexpr std::array<int, 2> kEntries = {10'000, 1'000'000};
constexpr std::size_t kPipeline = 1000;

long long used_memory(Environment& env) {
    const std::string info = env.redis().command({"INFO", "memory"}).str();
    const std::string field = "used_memory:";
    const auto at = info.find(field);
    return at == std::string::npos ? 0 : std::stoll(info.substr(at + field.size()));
}

// Writes `n` entries (enveloped or raw), returns the used_memory growth per entry, deletes them.
double bytes_per_entry(Environment& env, const ProductRepository& repo, int n, bool enveloped) {
    const BinaryCodec<Product> codec;
    const std::int64_t first = 9'000'000'000'000LL + static_cast<std::int64_t>(::getpid()) * 1'000'000;
    const auto send = [&](auto make) {
        for (int at = 0; at < n; at += static_cast<int>(kPipeline)) {
            std::vector<std::vector<std::string>> commands;
            for (int i = at; i < std::min(n, at + static_cast<int>(kPipeline)); ++i) commands.push_back(make(first + i));
            for (const auto& reply : env.redis().pipeline(commands)) {
                if (reply.is_error()) throw Error("scale entry memory: " + reply.error_message());
            }
        }
    };
    const long long before = used_memory(env);
    send([&](std::int64_t id) {
        const Product p{id, "bench item " + std::to_string(id), 1999, 1'000'000, 1};
        const std::string payload = codec.encode(p);
        return std::vector<std::string>{"SET", repo.key_of(id),
                                        enveloped ? CacheEntry::encode_value(1, payload) : payload, "PX", "3600000"};
    });
    const long long after = used_memory(env);
    send([&](std::int64_t id) { return std::vector<std::string>{"DEL", repo.key_of(id)}; });
    return static_cast<double>(after - before) / n;
}

std::string at_size(const char* what, int n) {
    return std::string(what) + "@" + std::to_string(n);
}

}  // namespace

void register_scale_entry_memory(Environment& env, Plan& plan) {
    Environment* e = &env;
    auto repo = std::shared_ptr<ProductRepository>(make_repository(env, std::make_shared<WriteThenDelete>()));
    const bool quick = env.budget().quick;
    benchmark::RegisterBenchmark(kBench, [e, repo, quick](benchmark::State& state) {
        if (!e->private_servers()) {
            state.SkipWithError("only on the bench's private redis-server (1M entries would be added to yours)");
            return;
        }
        for (auto _ : state) {
            for (int n : kEntries) {
                if (quick && n > 100'000) continue;
                // A set written first pays the growth of the keyspace's hash tables, which the
                // next may find grown already (Redis shrinks them later, from its cron): one set
                // written and deleted first, then ours and raw in the order ABBA.
                bytes_per_entry(*e, *repo, n, false);
                const double ours_a = bytes_per_entry(*e, *repo, n, true);
                const double raw_a = bytes_per_entry(*e, *repo, n, false);
                const double raw_b = bytes_per_entry(*e, *repo, n, false);
                const double ours_b = bytes_per_entry(*e, *repo, n, true);
                state.counters[at_size("ours", n)] = (ours_a + ours_b) / 2;
                state.counters[at_size("raw", n)] = (raw_a + raw_b) / 2;
            }
        }
    })
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1)
        ->Repetitions(1);

    const int largest = quick ? kEntries[0] : kEntries.back();
    plan.add(row_order::kScale, "scale: Redis memory per cached entry, " +
                                    (largest >= 1'000'000 ? std::to_string(largest / 1'000'000) + "M"
                                                          : std::to_string(largest / 1000) + "k") +
                                    " entries ÷ raw SET",
             "≤ 1.2×", {kBench}, [largest](const Results& r) {
                 const double ours = r.counter(kBench, at_size("ours", largest));
                 const double raw = r.counter(kBench, at_size("raw", largest));
                 const double ours_small = r.counter(kBench, at_size("ours", kEntries[0]));
                 TableRow row;
                 row.target = "≤ 1.2×";
                 row.ours = fixed(ours, 0) + " B per entry (envelope + payload + key + TTL)";
                 row.baseline = fixed(raw, 0) + " B per raw SET of the payload, same key and TTL";
                 if (raw <= 0 || ours <= 0) {
                     row.ratio = "—";
                     row.verdict = Verdict::Shown;
                 } else {
                     row.ratio = times(ours / raw);
                     row.verdict = ours / raw <= 1.2 ? Verdict::Met : Verdict::Missed;
                 }
                 row.notes = "used_memory growth over " + std::to_string(largest) + " entries, each set written alone " +
                             "and deleted before the next (ours, raw, raw, ours after one unmeasured); at 10k entries ours " + fixed(ours_small, 0) + " B, raw " +
                             fixed(r.counter(kBench, at_size("raw", kEntries[0])), 0) +
                             " B";
                 row.data = {{"bytes_per_entry", ours}, {"raw_bytes_per_entry", raw},
                             {"bytes_per_entry_10k", ours_small}, {"entries", largest}};
                 return row;
             });
}

}  // namespace lockstep::bench
