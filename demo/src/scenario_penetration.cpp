// penetration (docs/races.md C7): reads of ids that do not exist always miss and always reach the
// database, unless "not found" is cached too (RepositoryOptions::negative_ttl).
//
// Forced: one reader asks for the same missing id ten times. Without negative caching that is
// ten database queries; with it, one.
//
// Load: every worker reads random ids, half of them from a set of ids that do not exist. Every
// database load of a missing id beyond the first per id is one the negative cache would have
// saved.
#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "context.h"
#include "forced.h"
#include "lockstep/core/error.h"
#include "product_repository.h"
#include "products.h"
#include "scenarios.h"
#include "stats.h"
#include "workers.h"

namespace lockstep::demo {

namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using Repo = CachedRepository<Product>;

constexpr const char* kScenario = "penetration";
constexpr int kForcedReads = 10;
constexpr int kMissingIds = 10;
constexpr int kExistingIds = 10;

std::string label(bool negative) {
    return negative ? "negative cache (\"not found\", 30 s TTL)" : "none (negative_ttl = 0)";
}

// Worker role "penetration.reader".
json reader(Worker& w) {
    const auto& args = w.args;
    auto options = repository_options(w.services, "WriteThenDelete", LockMode::None);
    options.negative_ttl = args["negative"].get<bool>() ? 30s : 0ms;
    Repo repo(product_entity(), w.services.db(), w.services.redis(), options);
    const auto missing = args["missing"].get<std::vector<std::int64_t>>();
    const auto existing = args["existing"].get<std::vector<std::int64_t>>();
    const int ops = args["ops"].get<int>();
    std::mt19937_64 rng(args["seed"].get<std::uint64_t>() * 7919 + static_cast<std::uint64_t>(w.index));
    Samples read_ms;
    std::map<std::int64_t, long long> loads_of_missing;
    long long missing_reads = 0, found = 0;
    auto start = wall_us();
    for (int i = 0; i < ops; ++i) {
        const bool want_missing = existing.empty() || rng() % 2 == 0;
        const auto& pool = want_missing ? missing : existing;
        const auto id = pool[rng() % pool.size()];
        const auto before = repo.metrics().loads;
        auto t0 = std::chrono::steady_clock::now();
        auto p = repo.get(id);
        read_ms.add(ms_between(t0, std::chrono::steady_clock::now()));
        if (p) ++found;
        if (want_missing) {
            ++missing_reads;
            if (p) throw ConfigError("penetration", "a missing id was found");
            loads_of_missing[id] += static_cast<long long>(repo.metrics().loads - before);
        }
    }
    json per_id = json::object();
    for (const auto& [id, n] : loads_of_missing) per_id[std::to_string(id)] = n;
    auto m = repo.metrics();
    return {{"read_ms", read_ms.to_json()}, {"missing_reads", missing_reads}, {"found", found},
            {"missing_loads", per_id},     {"negative_hits", m.negative_hits}, {"loads", m.loads},
            {"start_us", start},           {"end_us", wall_us()}};
}

Trial forced_trial(DemoContext& ctx, bool negative) {
    const auto missing = ctx.new_ids();  // never inserted
    json args = {{"negative", negative},   {"missing", std::vector<std::int64_t>{missing}},
                 {"existing", json::array()}, {"ops", kForcedReads}, {"seed", ctx.options().seed}};
    auto r = run_workers(ctx, {{"penetration.reader", args}})[0];
    const auto loads = r["loads"].get<long long>();
    Trial t;
    t.reproduced = loads > 1;
    t.evidence = std::to_string(kForcedReads) + " reads of an id that does not exist: " + std::to_string(loads) +
                 " database quer" + (loads == 1 ? "y" : "ies") + ", " + std::to_string(r["negative_hits"].get<long long>()) +
                 " answered by a cached \"not found\"";
    t.metrics = {{"reads", kForcedReads}, {"db_loads", static_cast<double>(loads)},
                 {"negative_hits", r["negative_hits"].get<double>()}};
    return t;
}

void load_case(DemoContext& ctx, bool negative, Result r) {
    const int workers = ctx.options().workers();
    const int ops = ctx.options().iterations;
    ctx.progress(std::string(kScenario) + ": load, " + label(negative) + ": " + std::to_string(workers) + " readers x " +
                 std::to_string(ops) + " reads, half of missing ids");
    const auto first = ctx.new_ids(kMissingIds + kExistingIds);
    std::vector<std::int64_t> missing, existing;
    for (int i = 0; i < kMissingIds; ++i) missing.push_back(first + i);
    for (int i = 0; i < kExistingIds; ++i) {
        existing.push_back(first + kMissingIds + i);
        insert_product(ctx.services().db(), existing.back(), 10, "real item");
    }
    json args = {{"negative", negative}, {"missing", missing}, {"existing", existing}, {"ops", ops},
                 {"seed", ctx.options().seed}};
    auto results = run_workers(ctx, std::vector<WorkerSpec>(workers, WorkerSpec{"penetration.reader", args}));
    Samples read_ms;
    std::map<std::string, long long> loads_per_id;
    long long missing_reads = 0, negative_hits = 0, loads = 0;
    std::int64_t start = INT64_MAX, end = 0;
    for (const auto& r : results) {
        read_ms.merge(Samples::from_json(r["read_ms"]));
        missing_reads += r["missing_reads"].get<long long>();
        negative_hits += r["negative_hits"].get<long long>();
        loads += r["loads"].get<long long>();
        for (const auto& [id, n] : r["missing_loads"].items()) loads_per_id[id] += n.get<long long>();
        start = std::min(start, r["start_us"].get<std::int64_t>());
        end = std::max(end, r["end_us"].get<std::int64_t>());
    }
    long long missing_loads = 0, repeated = 0;
    for (const auto& [id, n] : loads_per_id) {
        missing_loads += n;
        repeated += std::max(0LL, n - 1);
    }
    const double seconds = std::max(1e-6, static_cast<double>(end - start) / 1e6);
    r.observed = repeated > 0 ? Outcome::Reproduced : Outcome::Prevented;
    r.evidence = std::to_string(missing_reads) + " reads of " + std::to_string(kMissingIds) + " missing ids: " +
                 std::to_string(missing_loads) + " database queries (" + std::to_string(repeated) +
                 " for an id already known missing), " + std::to_string(negative_hits) + " cached \"not found\" hits";
    r.cost = fixed1(static_cast<double>(loads) / seconds) + " DB queries/s, " +
             fixed1(static_cast<double>(read_ms.size()) / seconds) + " reads/s, read p99 " + fixed2(read_ms.percentile(99)) + " ms";
    r.metric("reads", static_cast<double>(read_ms.size()))
        .metric("missing_reads", static_cast<double>(missing_reads))
        .metric("missing_db_loads", static_cast<double>(missing_loads))
        .metric("repeated_missing_loads", static_cast<double>(repeated))
        .metric("negative_hits", static_cast<double>(negative_hits))
        .metric("db_loads", static_cast<double>(loads))
        .metric("db_loads_per_s", static_cast<double>(loads) / seconds)
        .metric("read_p50_ms", read_ms.percentile(50))
        .metric("read_p99_ms", read_ms.percentile(99))
        .metric("seconds", seconds);
    ctx.add(std::move(r));
}

void forced_rows(DemoContext& ctx, const RaceCase& c) {
    for (bool negative : {false, true}) {
        if (auto base = ctx.row(c, label(negative), Mode::Forced)) {
            record_forced(ctx, std::move(*base), [&](int) { return forced_trial(ctx, negative); });
        }
    }
}

void load_rows(DemoContext& ctx, const RaceCase& c) {
    for (bool negative : {false, true}) {
        if (auto r = ctx.row(c, label(negative), Mode::Load)) load_case(ctx, negative, std::move(*r));
    }
}

}  // namespace

void add_penetration() {
    add_scenario({kScenario,
                           "reads of ids that do not exist: without a negative cache each one queries the database, "
                           "with \"not found\" cached only the first does",
                  {}});
    roles()["penetration.reader"] = reader;
}

void add_race_c7() {
    RaceCase c{kScenario, "C7", "10 reads, one after another, of an id that does not exist", {"reader: reads the missing id again and again"}, "every worker reads a seeded mix of existing and 10 missing ids; database queries for an id already known missing", {}, forced_rows, load_rows};
    for (Mode mode : {Mode::Forced, Mode::Load}) {
        for (bool negative : {false, true}) {
            c.rows.push_back({label(negative), mode, negative ? Outcome::Prevented : Outcome::Reproduced});
        }
    }
    add_race(std::move(c));
}

}  // namespace lockstep::demo
