// The binlog follower (invalidation/, docs/invalidation.md), two rows:
//
// follower lag: a plain connection UPDATEs one row (no library code on the write path) and then
//   polls EXISTS on its cache key until the follower's DEL removed it. Ours: UPDATE returned ->
//   key gone added to the UPDATE, per call; baseline: the same raw UPDATE alone, timed in the
//   same loop. The lag (COMMIT returned -> key gone) p50 / p99 / max are counters; the issue's
//   target is p99 ≤ 1 ms on loopback.
// follower throughput: a burst of single-row UPDATEs committed as fast as one connection can
//   (the baseline: MariaDB's commit rate here), while the follower is stopped; then the follower
//   is started from its saved position and timed until it has applied all of them (decoded and
//   invalidated: the DELs landed), from the moment its dump connection is open (polled every
//   100 µs, so at most a few rows are applied before the clock starts) minus the server's seek
//   to the start position (`last_seek_ms`, shown in the notes): the connect and the seek grow
//   with the load and the binlog file, once per (re)connect, and are not the follower's rate.
//   Ratio: follower rate ÷ commit rate (≥ 1: it keeps up). The backlog's first DELs go out in
//   few pipelines (the follower batches what it has already received): `delete_pipelines`.
//
// The follower runs only inside these benchmarks (started and stopped per repetition), and its
// map uses a prefix of its own, so the other families' keys are never deleted by it.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "families.h"
#include "follower_options.h"
#include "lockstep/db/pooled_mysql_connection.h"
#include "lockstep/invalidation/binlog_invalidator.h"
#include "repositories.h"

namespace lockstep::bench {

namespace {

constexpr const char* kLag = "follower/lag";
constexpr const char* kThroughput = "follower/throughput";
using Clock = std::chrono::steady_clock;

double quantile(std::vector<double> v, double q) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
}

std::unique_ptr<BinlogInvalidator> make_follower(Environment& env, const std::string& prefix, const std::string& name,
                                                 std::uint32_t server_id) {
    return std::make_unique<BinlogInvalidator>(
        env.mysql_options(), env.redis(),
        InvalidationMap({{.table = "products", .entity = "product", .prefix = prefix}}),
        bench_follower_options(name, server_id));
}

}  // namespace

void register_follower(Environment& env, Plan& plan) {
    const Budget& b = env.budget();
    const int lag_updates = b.quick ? 1000 : 10000;
    const int burst = 5000;
    const std::string prefix = env.prefix() + "flw";
    const std::int64_t id = new_products(env, 1);
    const InvalidationMap map({{.table = "products", .entity = "product", .prefix = prefix}});
    const std::string key = map.key(map.bindings()[0], id);
    Environment* e = &env;
    const std::uint32_t server_id = 7000 + static_cast<std::uint32_t>(::getpid() % 1000) * 4;

    benchmark::RegisterBenchmark(
        kLag,
        [=](benchmark::State& state) {
            auto follower = make_follower(*e, prefix, "bench-lag-" + prefix, server_id);
            follower->start();
            if (!follower->wait_caught_up(std::chrono::seconds(20))) {
                state.SkipWithError("the follower did not catch up");
                return;
            }
            auto conn = e->db().acquire();
            std::vector<double> update_s, gone_s, lag_s;
            std::int64_t price = 0;
            for (auto _ : state) {
                e->redis().set(key, "v1:x", std::chrono::seconds(60));
                const auto t0 = Clock::now();
                conn->execute("UPDATE products SET stock = ?, version = version + 1 WHERE id = ?", {++price, id});
                const auto t1 = Clock::now();
                const auto deadline = t1 + std::chrono::seconds(5);
                while (e->redis().command({"EXISTS", key}).integer() != 0) {
                    if (Clock::now() > deadline) {
                        state.SkipWithError("a key was not deleted within 5 s");
                        return;
                    }
                }
                const auto t2 = Clock::now();
                update_s.push_back(std::chrono::duration<double>(t1 - t0).count());
                gone_s.push_back(std::chrono::duration<double>(t2 - t0).count());
                lag_s.push_back(std::chrono::duration<double>(t2 - t1).count());
            }
            const InvalidatorMetrics m = follower->metrics();
            follower->stop();
            state.counters["update_median_s"] = quantile(update_s, 0.5);
            state.counters["gone_median_s"] = quantile(gone_s, 0.5);
            state.counters["lag_p50_s"] = quantile(lag_s, 0.5);
            state.counters["lag_p99_s"] = quantile(lag_s, 0.99);
            state.counters["lag_max_s"] = quantile(lag_s, 1.0);
            state.counters["internal_p50_s"] = m.lag_p50_us / 1e6;
            state.counters["internal_p99_s"] = m.lag_p99_us / 1e6;
            state.counters["updates"] = static_cast<double>(lag_s.size());
        })
        ->Unit(benchmark::kMicrosecond)
        ->Iterations(lag_updates)
        ->Repetitions(3);

    benchmark::RegisterBenchmark(
        kThroughput,
        [=](benchmark::State& state) {
            const std::string name = "bench-tput-" + prefix;
            for (auto _ : state) {
                {
                    // Saves the current position, so the next follower starts before the burst;
                    // its start -> caught up with nothing pending is the fixed cost of a start.
                    auto f = make_follower(*e, prefix, name, server_id + 1);
                    f->start();
                    if (!f->wait_caught_up(std::chrono::seconds(20))) {
                        state.SkipWithError("the follower did not catch up");
                        return;
                    }
                    f->stop();
                }
                auto conn = e->db().acquire();
                const auto c0 = Clock::now();
                for (int i = 0; i < burst; ++i) {
                    conn->execute("UPDATE products SET stock = ?, version = version + 1 WHERE id = ?",
                                  {std::int64_t{i}, id});
                }
                const double commit_s = std::chrono::duration<double>(Clock::now() - c0).count();
                auto f = make_follower(*e, prefix, name, server_id + 1);
                f->start();
                const auto connect_deadline = Clock::now() + std::chrono::seconds(20);
                while (!f->metrics().connected && Clock::now() < connect_deadline) {
                    std::this_thread::sleep_for(std::chrono::microseconds(100));
                }
                const auto f0 = Clock::now();
                if (!f->wait_caught_up(std::chrono::seconds(120))) {
                    state.SkipWithError("the follower did not catch up with the burst");
                    return;
                }
                const double follow_s = std::chrono::duration<double>(Clock::now() - f0).count();
                const InvalidatorMetrics m = f->metrics();
                f->stop();
                // The server's silent seek to the start position is a cost per (re)connect that
                // grows with its binlog file (hundreds of MB by the end of a whole table), not per
                // row: shown apart, and the rate counts from the first event past the start.
                const double seek_s = m.last_seek_ms / 1e3;
                state.counters["commits_per_s"] = burst / commit_s;
                state.counters["follower_per_s"] = burst / std::max(follow_s - seek_s, 1e-6);
                state.counters["seek_s"] = seek_s;
                state.counters["transactions"] = static_cast<double>(m.transactions);
                // Round trips of first DELs for the whole backlog: the follower pipelines every
                // transaction it has buffered (docs/invalidation.md, "The follower's flush").
                state.counters["delete_pipelines"] = static_cast<double>(m.delete_pipelines);
                // A reconnect restarts the server's seek for the start position: a slow row with
                // reconnects is the network or a seek, not the decoder.
                state.counters["reconnects"] = static_cast<double>(m.reconnects);
            }
        })
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1)
        ->Repetitions(3);

    plan.add(row_order::kFollower, "follower lag", "lag p99 ≤ 1 ms", {kLag}, [](const Results& r) {
        const double upd = r.counter(kLag, "update_median_s");
        const double gone = r.counter(kLag, "gone_median_s");
        const double p50 = r.counter(kLag, "lag_p50_s");
        const double p99 = r.counter(kLag, "lag_p99_s");
        TableRow row;
        row.ours = micros(gone) + " UPDATE + key gone";
        row.baseline = micros(upd) + " raw UPDATE";
        row.ratio = times(gone / upd);
        row.verdict = p99 <= 1e-3 ? Verdict::Met : Verdict::Missed;
        row.notes = "lag COMMIT returned -> key gone over " + fixed(r.counter(kLag, "updates"), 0) + " updates: p50 " +
                    micros(p50) + ", p99 " + micros(p99) + ", max " + micros(r.counter(kLag, "lag_max_s")) +
                    " (medians of 3 repetitions); follower-internal (first event -> DEL landed) p50 " +
                    micros(r.counter(kLag, "internal_p50_s")) + ", p99 " + micros(r.counter(kLag, "internal_p99_s"));
        row.data = {{"update_median_seconds", upd}, {"gone_median_seconds", gone}, {"lag_p50_seconds", p50},
                    {"lag_p99_seconds", p99}, {"lag_max_seconds", r.counter(kLag, "lag_max_s")},
                    {"lag_p99_max_over_repetitions", r.counter_max(kLag, "lag_p99_s")}};
        return row;
    });
    plan.add(row_order::kFollower + 1, "follower throughput", "≥ 1× the commit rate", {kThroughput},
             [](const Results& r) {
                 const double ours = r.counter(kThroughput, "follower_per_s");
                 const double base = r.counter(kThroughput, "commits_per_s");
                 TableRow row;
                 row.ours = per_second(ours, "rows") + " decoded + invalidated";
                 row.baseline = per_second(base, "commits") + " single-row UPDATEs, one connection";
                 row.ratio = times(ours / base);
                 row.verdict = ours >= base ? Verdict::Met : Verdict::Missed;
                 row.notes = "a backlog of 5,000 single-row transactions replayed from the saved position, timed "
                             "from the first event past it to the last DEL landed (before it: the server's seek "
                             "through its binlog file, " +
                             fixed(r.counter(kThroughput, "seek_s") * 1e3, 0) + " ms median, " +
                             fixed(r.counter_max(kThroughput, "seek_s") * 1e3, 0) + " ms max); follower " +
                             spread(r, kThroughput, "follower_per_s") + " rows/s, commits " +
                             spread(r, kThroughput, "commits_per_s") + "/s over 3 repetitions; " +
                             fixed(r.counter(kThroughput, "delete_pipelines"), 0) + " DEL pipelines for the backlog; " +
                             fixed(r.counter_max(kThroughput, "reconnects"), 0) + " reconnects at most";
                 row.data = {{"follower_rows_per_second", ours}, {"commits_per_second", base}, {"ratio", ours / base},
                             {"seek_seconds", r.counter(kThroughput, "seek_s")},
                             {"delete_pipelines", r.counter(kThroughput, "delete_pipelines")}};
                 return row;
             });
}

}  // namespace lockstep::bench
