// Mixed load: 8 threads on 16 hot products, 90% reads (get_versioned) and 10% writes (update),
// per write strategy and lock mode, against WriteThenDelete with no lock. Shown: reads per
// second and the stale-read rate.
//
// A stale read is one that returns an older version than a write that had *returned* before
// the read started: every writer publishes the version it committed once update() is back, and
// every reader notes the highest published version of its key before it reads. That is what a
// user sees as "I wrote it, then read the old value"; it happens when a race (C2: a reader that
// loaded the old row backfills after the writer's DEL) leaves an old entry in the cache.
//
// Every read and write is also recorded in a FreshnessHistory (lockstep::testing) with its exact
// times and versions, and checked against the strategy's documented staleness bound
// (docs/strategies.md): 0 where C1-C4 are closed (WriteThrough, Lease, lock modes Mutex and
// ReadWrite), max_ttl plus the longest read for TtlBounding, and the TTL where C2/C4 stay open
// (WriteThenDelete, DelayedDoubleDelete without a lock: "open", never a failed row). A stale read
// beyond a closed bound fails the row and prints its evidence.
#include <algorithm>
#include <atomic>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "families.h"
#include "lockstep/servers/freshness_history.h"
#include "repositories.h"

namespace lockstep::bench {

namespace {

constexpr int kThreads = 8;
constexpr int kKeys = 16;
constexpr const char* kBaseline = "mixed/WriteThenDelete+None";

struct MixedCase {
    std::string label;  // "WriteThenDelete+None"
    std::shared_ptr<ProductRepository> repo;
    std::int64_t first_id = 0;
    // The highest version committed by a write that has returned, per key.
    std::vector<std::atomic<std::int64_t>> committed = std::vector<std::atomic<std::int64_t>>(kKeys);
    // Every operation of every repetition of one run (--runs N: of each run), checked when the
    // run's row is made; then a new history starts for the next run.
    std::unique_ptr<FreshnessHistory> history;
    std::atomic<std::uint64_t> unchecked{0};  // mixed_load calls recorded since the last check
    std::atomic<std::int64_t> longest_read_us{0};
    // The documented staleness bound (see register_mixed) and the check against it, made once.
    std::chrono::milliseconds bound{0};
    bool open = false;
    std::optional<FreshnessCheck> check;
};

void mixed_load(benchmark::State& state, MixedCase& c) {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    std::uniform_int_distribution<int> pick_key(0, kKeys - 1);
    std::uniform_int_distribution<int> pick_op(0, 9);
    long long reads = 0, writes = 0, stale = 0;
    std::string error;
    c.unchecked.fetch_add(1);
    for (auto _ : state) {
        const int k = pick_key(rng);
        const std::int64_t id = c.first_id + k;
        const std::int64_t at = monotonic_us();
        const std::string key = std::to_string(id);
        try {
            if (pick_op(rng) == 0) {
                std::int64_t before = 0;
                const auto stored = c.repo->update(id, [&](Product& p) {
                    before = p.version;
                    p.price += 1;
                });
                c.history->write_done(state.thread_index(), key, at, stored ? stored->version : 0);
                auto& slot = c.committed[k];
                std::int64_t seen = slot.load();
                while (seen < before + 1 && !slot.compare_exchange_weak(seen, before + 1)) {
                }
                ++writes;
            } else {
                const std::int64_t floor = c.committed[k].load();
                auto v = c.repo->get_versioned(id);
                c.history->read_done(state.thread_index(), key, at, v ? v->version : 0);
                const std::int64_t took = monotonic_us() - at;
                std::int64_t longest = c.longest_read_us.load(std::memory_order_relaxed);
                while (took > longest && !c.longest_read_us.compare_exchange_weak(longest, took)) {
                }
                if (!v) {
                    error = "a product row vanished";
                    continue;
                }
                if (v->version < floor) ++stale;
                ++reads;
            }
        } catch (const std::exception& e) {
            error = e.what();
        }
    }
    // Not timed: delayed deletes land before the next benchmark starts.
    if (state.thread_index() == 0) c.repo->settle(std::chrono::seconds(5));
    using benchmark::Counter;
    state.counters["reads_per_s"] = Counter(static_cast<double>(reads), Counter::kIsRate);
    state.counters["writes_per_s"] = Counter(static_cast<double>(writes), Counter::kIsRate);
    state.counters["reads"] = static_cast<double>(reads);
    state.counters["stale"] = static_cast<double>(stale);
    if (!error.empty()) state.SkipWithError(error.c_str());
}

std::string stale_text(const Results& r, const std::string& name) {
    const double reads = r.counter_sum(name, "reads");
    const double stale = r.counter_sum(name, "stale");
    return fixed(reads > 0 ? stale / reads * 100 : 0, 3) + "% stale";
}

// The history checked against the case's bound, once; a bound above 0 also allows the longest
// read, which may backfill the stale entry that late after the write it missed.
const FreshnessCheck& freshness(MixedCase& c) {
    const bool recorded = c.unchecked.exchange(0) > 0;  // a run recorded since the last check
    if (!c.check || recorded) {
        std::chrono::microseconds allowed = c.bound;
        if (allowed.count() > 0) allowed += std::chrono::microseconds(c.longest_read_us.load());
        c.check = c.history->check(allowed);
        c.history = std::make_unique<FreshnessHistory>(c.label);  // the next run's operations
        c.longest_read_us = 0;
        if (!c.check->ok()) std::cerr << c.check->describe();
    }
    return *c.check;
}

std::string freshness_text(MixedCase& c) {
    const FreshnessCheck& f = freshness(c);
    std::string s = "anomalies " + std::to_string(f.anomalies.size()) + " beyond " +
                    (c.open ? "the TTL (bound open: C2/C4)" : std::to_string(c.bound.count()) + " ms") + ", " +
                    std::to_string(f.stale_within_bound) + " stale within";
    if (f.max_late_us > 0) s += ", latest " + fixed(static_cast<double>(f.max_late_us) / 1000, 1) + " ms";
    return s;
}

}  // namespace

void register_mixed(Environment& env, Plan& plan) {
    const Budget& b = env.budget();
    struct Choice {
        std::string label;
        std::shared_ptr<const WriteStrategy> strategy;
        LockMode mode;
        // The documented staleness bound: how long after a write returned a read may still
        // return an older version. `open`: the strategy leaves C2/C4 open, the bound is the TTL.
        std::chrono::milliseconds bound;
        bool open = false;
    };
    using std::chrono::milliseconds;
    const milliseconds ttl = std::chrono::hours(1);  // make_repository's
    const std::vector<Choice> choices = {
        {"WriteThenDelete+None", std::make_shared<WriteThenDelete>(), LockMode::None, ttl, true},
        {"DelayedDoubleDelete(100ms)+None",
         std::make_shared<DelayedDoubleDelete>(std::chrono::milliseconds(100)), LockMode::None, ttl, true},
        {"TtlBounding(2s)+None",
         std::make_shared<TtlBounding>(std::chrono::seconds(2), std::chrono::milliseconds(200)),
         LockMode::None, milliseconds(2000)},
        {"WriteThrough+None", std::make_shared<WriteThrough>(), LockMode::None, milliseconds(0)},
        {"Lease+None", std::make_shared<Lease>(), LockMode::None, milliseconds(0)},
        {"WriteThenDelete+Mutex", std::make_shared<WriteThenDelete>(), LockMode::Mutex, milliseconds(0)},
        {"WriteThenDelete+ReadWrite", std::make_shared<WriteThenDelete>(), LockMode::ReadWrite, milliseconds(0)},
    };
    int index = 0;
    std::shared_ptr<MixedCase> baseline;
    for (const auto& choice : choices) {
        auto c = std::make_shared<MixedCase>();
        c->label = choice.label;
        c->history = std::make_unique<FreshnessHistory>(choice.label);
        c->bound = choice.bound;
        c->open = choice.open;
        if (!baseline) baseline = c;
        c->repo = make_repository(env, choice.strategy, choice.mode);
        c->first_id = new_products(env, kKeys);
        const std::string name = "mixed/" + choice.label;
        benchmark::RegisterBenchmark(name.c_str(), [c](benchmark::State& state) { mixed_load(state, *c); })
            ->Threads(kThreads)
            ->UseRealTime()
            ->MinTime(b.throughput_min_time)
            ->Repetitions(b.throughput_repetitions);
        if (index++ == 0) continue;  // the baseline has no row of its own: it is every row's baseline
        plan.add(row_order::kMixed + index, "mixed load: " + choice.label, "shown", {name, kBaseline},
                 [name, c, baseline](const Results& r) {
                     TableRow row = rate_row(r, name, kBaseline, "reads_per_s", 0, "reads");
                     row.ours += ", " + stale_text(r, name);
                     row.baseline += ", " + stale_text(r, kBaseline);
                     row.notes = fixed(r.counter_sum(name, "stale"), 0) + " stale of " +
                                 fixed(r.counter_sum(name, "reads"), 0) + " reads (baseline " +
                                 fixed(r.counter_sum(kBaseline, "stale"), 0) + " of " +
                                 fixed(r.counter_sum(kBaseline, "reads"), 0) +
                                 "); 8 threads, 16 keys, 90% reads; freshness history: " + freshness_text(*c) +
                                 " (baseline " + freshness_text(*baseline) + ")";
                     const FreshnessCheck& f = freshness(*c);
                     // A stale read beyond a closed bound breaks what the strategy promises.
                     if (!c->open && !f.ok()) row.verdict = Verdict::Failed;
                     row.data["stale"] = r.counter_sum(name, "stale");
                     row.data["reads"] = r.counter_sum(name, "reads");
                     row.data["baseline_stale"] = r.counter_sum(kBaseline, "stale");
                     row.data["baseline_reads"] = r.counter_sum(kBaseline, "reads");
                     row.data["anomalies"] = f.anomalies.size();
                     row.data["stale_within_bound"] = f.stale_within_bound;
                     row.data["bound_ms"] = c->bound.count();
                     row.data["bound_open"] = c->open;
                     row.data["baseline_anomalies"] = freshness(*baseline).anomalies.size();
                     row.data["baseline_stale_within_bound"] = freshness(*baseline).stale_within_bound;
                     return row;
                 });
    }
}

}  // namespace lockstep::bench
