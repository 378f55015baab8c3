// stale-cache (docs/races.md C1-C5, C8): the cache and the database disagree.
//
// Forced: each race's interleaving is its own file (race_c1.cpp ... race_c8.cpp, sharing
// stale_cache.h), for every write strategy x lock mode, made deterministic with the
// repository's fault points (strategies/fault_points.h). Under the table a matrix sums them up.
//
// Load: a seeded random mix of reads and writes over a few hot keys per strategy x lock mode,
// with random pauses (up to --jitter-us) at the racy steps, judged by the ConsistencyChecker.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "consistency_checker.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/servers/freshness_history.h"
#include "products.h"
#include "scenarios.h"
#include "stale_cache.h"
#include "stats.h"

namespace lockstep::demo {

namespace {

using namespace std::chrono_literals;
using namespace stale;
using nlohmann::json;

// ---- the random mixed workload --------------------------------------------------------------

constexpr int kLoadKeys = 8;
constexpr int kReadPercent = 80;
constexpr int kJitterUs = 1000;

// Worker role "stale.load": a seeded random mix of reads and writes over the keys.
json load_role(Worker& w) {
    const auto& args = w.args;
    const std::string strategy = args["strategy"].get<std::string>();
    const LockMode mode = lock_mode_named(args["mode"].get<std::string>());
    const auto keys = args["keys"].get<std::vector<std::int64_t>>();
    const int ops = args["ops"].get<int>();
    const int read_percent = args["read_percent"].get<int>();
    const int jitter_us = args["jitter_us"].get<int>();
    Repo repo(product_entity(), w.services.db(), w.services.redis(), repository_options(w.services, strategy, mode));
    std::mt19937_64 rng(args["seed"].get<std::uint64_t>() * 1000003 + static_cast<std::uint64_t>(w.index));
    std::uniform_int_distribution<int> pick_key(0, static_cast<int>(keys.size()) - 1);
    std::uniform_int_distribution<int> percent(0, 99);
    std::uniform_int_distribution<int> jitter(0, jitter_us);
    std::mt19937_64 pause_rng(rng());
    std::int64_t commit_us = 0;
    // Random pauses at the racy steps widen the windows that random timing alone rarely hits.
    auto pause = [&] {
        std::this_thread::sleep_for(std::chrono::microseconds(jitter(pause_rng)));
    };
    ThreadFault after_read(std::string(repo_points::after_db_read), pause, -1);
    ThreadFault after_commit(std::string(repo_points::after_commit), [&] {
        commit_us = wall_us();
        pause();
    }, -1);
    std::vector<ReadRecord> reads;
    std::vector<WriteRecord> writes;
    // The same operations for the FreshnessHistory, as FreshnessOp lines (monotonic times).
    json fresh = json::array();
    auto record = [&](FreshnessOp::Kind kind, std::int64_t id, std::int64_t version, std::int64_t at) {
        fresh.push_back(
            FreshnessOp{w.index, 0, std::to_string(id), kind, version, at, monotonic_us(), FreshnessOp::Outcome::Ok}
                .to_line());
    };
    Samples read_ms, write_ms;
    const auto start = wall_us();
    for (int i = 0; i < ops; ++i) {
        const auto id = keys[pick_key(rng)];
        if (percent(rng) < read_percent) {
            auto t0 = std::chrono::steady_clock::now();
            const auto s = wall_us();
            const auto at = monotonic_us();
            auto v = repo.get_versioned(id);
            record(FreshnessOp::Kind::Read, id, v ? v->version : 0, at);
            reads.push_back({id, v ? v->version : 0, s, wall_us()});
            read_ms.add(ms_between(t0, std::chrono::steady_clock::now()));
        } else {
            auto t0 = std::chrono::steady_clock::now();
            std::int64_t written = 0;
            const auto price = static_cast<std::int64_t>(rng() % 100000);
            const auto at = monotonic_us();
            const auto stored = repo.update(id, [&](Product& p) {
                written = p.version + 1;  // the repository writes version + 1
                p.price = price;
            });
            // The stored row carries the exact version written (the repository may write more than + 1).
            record(FreshnessOp::Kind::Write, id, stored ? stored->version : 0, at);
            writes.push_back({id, written, commit_us, wall_us()});
            write_ms.add(ms_between(t0, std::chrono::steady_clock::now()));
        }
    }
    const auto end = wall_us();
    if (!repo.settle(30s)) throw TimeoutError("background deletes did not drain");
    return {{"reads", ConsistencyChecker::to_json(reads)},
            {"writes", ConsistencyChecker::to_json(writes)},
            {"fresh", std::move(fresh)},
            {"read_ms", read_ms.to_json()},
            {"write_ms", write_ms.to_json()},
            {"start_us", start},
            {"end_us", end},
            {"metrics", metrics_json(repo.metrics())}};
}

// Samples the cached versions of `keys` every millisecond until stopped.
class CacheSampler {
public:
    CacheSampler(RedisClient& redis, std::vector<std::pair<std::int64_t, std::string>> keys)
        : redis_(redis), keys_(std::move(keys)), thread_([this] { loop(); }) {}
    ~CacheSampler() { stop(); }
    void stop() {
        stopping_.store(true);
        if (thread_.joinable()) thread_.join();
    }
    std::vector<CacheSample> samples() {
        stop();
        return samples_;
    }

private:
    void loop() {
        std::vector<std::vector<std::string>> gets;
        for (const auto& [id, key] : keys_) gets.push_back({"GET", key});
        while (!stopping_.load()) {
            const auto at = wall_us();
            try {
                auto replies = redis_.pipeline(gets);
                for (std::size_t i = 0; i < replies.size(); ++i) {
                    std::optional<std::int64_t> v;
                    if (replies[i].type() == RedisReply::Type::String) {
                        auto e = CacheEntry::decode(replies[i].str());
                        if (e && e->kind == CacheEntry::Kind::Value) v = e->version;
                        if (e && e->kind == CacheEntry::Kind::NotFound) v = 0;
                    }
                    samples_.push_back({at, keys_[i].first, v});
                }
            } catch (const std::exception&) {
                // A missed sample is only a gap in the picture.
            }
            std::this_thread::sleep_for(1ms);
        }
    }
    RedisClient& redis_;
    std::vector<std::pair<std::int64_t, std::string>> keys_;
    std::vector<CacheSample> samples_;
    std::atomic<bool> stopping_{false};
    std::thread thread_;
};

void load_case(DemoContext& ctx, const std::string& strategy, const std::string& mode, Result r) {
    auto& s = ctx.services();
    const int workers = ctx.options().workers();
    const int ops = ctx.options().iterations;
    if (strategy == strategy_infos().front().name && mode == lock_modes().front()) {
        ctx.progress(std::string(kScenario) + ": load, " + std::to_string(strategy_infos().size() * lock_modes().size()) +
                     " strategy x lock mode runs of " + std::to_string(workers) + " workers x " + std::to_string(ops) +
                     " ops, " + std::to_string(kReadPercent) + "% reads, " + std::to_string(kLoadKeys) + " keys");
    }
    const auto first = ctx.new_ids(kLoadKeys);
    std::vector<std::int64_t> ids;
    Repo local(product_entity(), s.db(), s.redis(), repository_options(s, strategy, lock_mode_named(mode)));
    std::vector<std::pair<std::int64_t, std::string>> keys;
    ConsistencyChecker checker;
    for (int k = 0; k < kLoadKeys; ++k) {
        ids.push_back(first + k);
        insert_product(s.db(), first + k, 10, "hot item");
        keys.emplace_back(first + k, local.key_of(first + k));
        checker.initial(first + k, 1);
    }
    json args = {{"strategy", strategy}, {"mode", mode},           {"keys", ids},
                 {"ops", ops},           {"read_percent", kReadPercent}, {"jitter_us", kJitterUs},
                 {"seed", ctx.options().seed}};
    std::vector<json> results;
    {
        CacheSampler sampler(s.redis(), keys);
        results = run_workers(ctx, std::vector<WorkerSpec>(workers, WorkerSpec{"stale.load", args}));
        for (const auto& smp : sampler.samples()) checker.add(smp);
    }
    // Closed when a lock keeps backfills and writes apart, or the strategy refuses stale sets
    // (as add_race_c1_c4_load): no stale read after a write returned. Otherwise C2/C4 stay open
    // until the TTL (docs/strategies.md), the bound the history is checked against.
    const bool closed = mode != "None" || strategy == "WriteThrough" || strategy == "Lease";
    FreshnessHistory history(label(strategy, mode));
    Samples read_ms, write_ms;
    std::int64_t start = INT64_MAX, end = 0;
    long long refused = 0, hits = 0, misses = 0;
    for (const auto& x : results) {
        checker.add_json(x["reads"], x["writes"]);
        for (const auto& line : x["fresh"]) {
            if (auto op = FreshnessOp::from_line(line.get<std::string>())) history.add(std::move(*op));
        }
        read_ms.merge(Samples::from_json(x["read_ms"]));
        write_ms.merge(Samples::from_json(x["write_ms"]));
        start = std::min(start, x["start_us"].get<std::int64_t>());
        end = std::max(end, x["end_us"].get<std::int64_t>());
        refused += x["metrics"]["stale_sets_refused"].get<long long>();
        hits += x["metrics"]["hits"].get<long long>();
        misses += x["metrics"]["misses"].get<long long>();
    }
    for (const auto& [id, key] : keys) checker.final_state(id, cached_version(s.redis(), key), db_version(s.db(), id));
    ConsistencyReport c = checker.analyse();
    const auto ttl = local.options().ttl + local.options().ttl_jitter;
    const FreshnessCheck fresh =
        history.check(closed ? std::chrono::microseconds(0) : std::chrono::microseconds(ttl));
    if (!fresh.ok() && closed) ctx.progress(std::string(kScenario) + ": " + fresh.describe(1));
    const double seconds = std::max(1e-6, static_cast<double>(end - start) / 1e6);
    const double ops_per_s = static_cast<double>(read_ms.size() + write_ms.size()) / seconds;
    const bool lasting = c.lasting_stale_reads > 0 || c.lasting_stale_entries > 0 || !c.disagreeing_keys.empty();
    r.observed = lasting ? Outcome::Reproduced : Outcome::Prevented;
    r.evidence = std::to_string(c.stale_reads) + " of " + std::to_string(c.reads) + " reads stale (" +
                 fixed2(c.stale_read_rate * 100) + "%), " + std::to_string(c.lasting_stale_reads) +
                 " after the write had returned; stale entries lived max " + fixed1(c.stale_entry_life_max_ms) +
                 " ms, p99 " + fixed1(c.stale_entry_life_p99_ms) + " ms; " + std::to_string(c.disagreeing_keys.size()) +
                 " keys disagree after drain; freshness history: " + std::to_string(fresh.anomalies.size()) +
                 " anomalies beyond " + (closed ? std::string("0 ms") : "the TTL (bound open: C2/C4)") + ", " +
                 std::to_string(fresh.stale_within_bound) + " stale within, latest " +
                 fixed1(static_cast<double>(fresh.max_late_us) / 1000) + " ms";
    r.cost = fixed1(ops_per_s) + " ops/s, read p99 " + fixed2(read_ms.percentile(99)) + " ms, write p99 " +
             fixed2(write_ms.percentile(99)) + " ms";
    r.metric("reads", static_cast<double>(c.reads))
        .metric("writes", static_cast<double>(write_ms.size()))
        .metric("stale_reads", static_cast<double>(c.stale_reads))
        .metric("stale_read_rate", c.stale_read_rate)
        .metric("stale_read_age_max_ms", c.stale_read_age_max_ms)
        .metric("stale_read_age_p99_ms", c.stale_read_age_p99_ms)
        .metric("lasting_stale_reads", static_cast<double>(c.lasting_stale_reads))
        .metric("stale_entries", static_cast<double>(c.stale_entries))
        .metric("lasting_stale_entries", static_cast<double>(c.lasting_stale_entries))
        .metric("stale_entry_life_max_ms", c.stale_entry_life_max_ms)
        .metric("stale_entry_life_p99_ms", c.stale_entry_life_p99_ms)
        .metric("freshness_anomalies", static_cast<double>(fresh.anomalies.size()))
        .metric("freshness_stale_within_bound", static_cast<double>(fresh.stale_within_bound))
        .metric("freshness_latest_stale_ms", static_cast<double>(fresh.max_late_us) / 1000)
        .metric("cache_samples", static_cast<double>(c.samples))
        .metric("keys_disagreeing_after_drain", static_cast<double>(c.disagreeing_keys.size()))
        .metric("stale_sets_refused", static_cast<double>(refused))
        .metric("hit_ratio", hits + misses > 0 ? static_cast<double>(hits) / static_cast<double>(hits + misses) : 0)
        .metric("ops_per_s", ops_per_s)
        .metric("read_p50_ms", read_ms.percentile(50))
        .metric("read_p99_ms", read_ms.percentile(99))
        .metric("write_p50_ms", write_ms.percentile(50))
        .metric("write_p99_ms", write_ms.percentile(99))
        .metric("workers", workers)
        .metric("seconds", seconds);
    // The lifetime distribution (the HTML report draws it).
    for (std::size_t b = 0; b < c.stale_entry_life_histogram.size(); ++b) {
        const std::string name = b < std::size(kLifeBucketsMs)
                                     ? "stale_entry_life_le_" + std::to_string(static_cast<int>(kLifeBucketsMs[b])) + "ms"
                                     : "stale_entry_life_gt_" + std::to_string(static_cast<int>(kLifeBucketsMs[b - 1])) + "ms";
        r.metric(name, static_cast<double>(c.stale_entry_life_histogram[b]));
    }
    ctx.add(std::move(r));
}

// The forced results as one matrix: strategy x lock mode against the races, so that which
// protection closes which race reads at a glance.
void add_matrix(DemoContext& ctx) {
    std::vector<std::string> columns;  // in the order the races ran
    std::map<std::string, std::map<std::string, std::string>> cells;
    std::vector<std::string> rows;
    for (const auto& r : ctx.report().results_of(kScenario)) {
        // Rows of the strategy x lock mode matrix only ("<strategy> x <mode>[, variant]").
        if (r.mode != Mode::Forced || r.protection.find(" x ") == std::string::npos) continue;
        std::string row = r.protection;
        std::string column = r.race;
        if (r.race == "C5") {
            const bool crash = row.find("dies") != std::string::npos;
            column = crash ? "C5 crash" : "C5 timeout";
            row = row.substr(0, row.find(','));
        }
        if (std::find(rows.begin(), rows.end(), row) == rows.end()) rows.push_back(row);
        if (std::find(columns.begin(), columns.end(), column) == columns.end()) columns.push_back(column);
        bool bounded = false;
        for (const auto& [name, value] : r.metrics) {
            if (name == "bounded" && value > 0) bounded = true;
        }
        std::string cell = !r.error.empty() ? "error"
                           : r.observed == Outcome::Prevented ? "closed"
                           : bounded ? "bounded"
                                     : "OPEN";
        if (!passed(r)) cell += " (FAIL)";
        cells[row][column] = cell;
    }
    if (rows.empty()) return;
    std::size_t w0 = std::string("strategy x lock mode").size();  // the header
    for (const auto& row : rows) w0 = std::max(w0, row.size());
    std::string text =
        "stale-cache, forced, at a glance: closed = the cache ends fresh; OPEN = stale until the TTL; bounded = stale "
        "until the TtlBounding cap\n";
    auto line = [&](const std::string& first, const std::vector<std::string>& rest) {
        std::string l = first + std::string(w0 - first.size() + 2, ' ');
        for (const auto& c : rest) l += c + std::string(c.size() < 12 ? 12 - c.size() : 1, ' ');
        while (!l.empty() && l.back() == ' ') l.pop_back();
        text += l + "\n";
    };
    line("strategy x lock mode", columns);
    for (const auto& row : rows) {
        std::vector<std::string> rest;
        for (const auto& c : columns) rest.push_back(cells[row].count(c) ? cells[row][c] : "-");
        line(row, rest);
    }
    ctx.report().add_note(kScenario, text);
}

void load_rows(DemoContext& ctx, const RaceCase& c) {
    for (const auto& s : strategy_infos()) {
        for (const auto& mode : lock_modes()) {
            if (auto r = ctx.row(c, label(s.name, mode), Mode::Load)) load_case(ctx, s.name, mode, std::move(*r));
        }
    }
}

}  // namespace

void add_stale_cache() {
    add_scenario({kScenario,
                  "every write strategy x lock mode under each forced cache race, then a seeded random "
                  "read/write mix judged by a consistency checker (stale-read rate, stale entry lifetime, "
                  "keys that disagree after the run)",
                  add_matrix});
    roles()["stale.load"] = load_role;
}

// The load run judges C1-C4 at once: a read after the write returned that saw older data, a
// stale entry that outlived its writer, or a key that disagrees at the end.
void add_race_c1_c4_load() {
    RaceCase c{kScenario, "C1-C4", "nothing: seeded random timing, widened by random pauses at the racy steps",
               {"worker 1..N: a seeded 80/20 mix of reads and writes over 8 hot keys", "sampler: reads every cached version every ms"},
               "--threads x --iterations operations per strategy x lock mode, judged by the consistency checker",
               {}, {}, load_rows};
    for (const auto& s : strategy_infos()) {
        for (const auto& mode : lock_modes()) {
            // Closed when a lock keeps backfills and writes apart, or the strategy refuses stale sets.
            const bool closed = mode != "None" || s.name == "WriteThrough" || s.name == "Lease";
            c.rows.push_back({label(s.name, mode), Mode::Load, closed ? Outcome::Prevented : Outcome::Reproduced});
        }
    }
    add_race(std::move(c));
}

}  // namespace lockstep::demo
