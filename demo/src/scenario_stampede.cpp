// stampede (docs/races.md C6): a hot key is missing (expired) and many readers miss it at once; each
// one that loads from the database is a query the database did not need.
//
// Forced: N readers meet (a rendezvous through Redis), then all read the same missing key; the
// database read is slowed to 200 ms (fault point repo.after_db_read), so every reader has missed
// before any value lands. Without the guard every reader queries the database; with it
// (RepositoryOptions::stampede_guard: the first reader puts a marker in the key, the others wait
// for the value) exactly one does.
//
// Load: for --iterations x 5 ms, every worker reads one hot key whose entries live 50 ms, the
// database read slowed by 5 ms; each read that loaded records when. Two loads of the key that
// overlap in time are a stampede: the second was redundant.
#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "context.h"
#include "forced.h"
#include "lockstep/core/error.h"
#include "lockstep/db/mysql_pool.h"
#include "product_repository.h"
#include "products.h"
#include "scenarios.h"
#include "stats.h"
#include "thread_faults.h"
#include "workers.h"

namespace lockstep::demo {

namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using Repo = CachedRepository<Product>;

constexpr const char* kScenario = "stampede";
constexpr auto kForcedSlowRead = 200ms;
constexpr auto kLoadSlowRead = 5ms;
constexpr auto kLoadTtl = 50ms;

std::string guard_label(bool guard) {
    return guard ? "stampede guard (one loader per key)" : "none (every miss loads)";
}

// Worker role "stampede.reader".
json reader(Worker& w) {
    const auto& args = w.args;
    const bool forced = args["forced"].get<bool>();
    const auto id = args["product"].get<std::int64_t>();
    auto options = repository_options(w.services, "WriteThenDelete", LockMode::None, forced ? 60s : kLoadTtl);
    options.stampede_guard = args["guard"].get<bool>();
    Repo repo(product_entity(), w.services.db(), w.services.redis(), options);
    if (forced) {
        ThreadFault slow(std::string(repo_points::after_db_read), fault::pause(kForcedSlowRead));
        const std::string tag = args["tag"].get<std::string>();
        if (!w.services.signals().rendezvous(tag + ":start", args["parties"].get<int>(), 30s)) {
            throw TimeoutError("readers did not meet");
        }
        auto t0 = std::chrono::steady_clock::now();
        auto p = repo.get(id);
        double ms = ms_between(t0, std::chrono::steady_clock::now());
        if (!p) throw ConfigError("stampede", "the hot product is missing");
        auto m = repo.metrics();
        return {{"loads", m.loads}, {"guard_waits", m.guard_waits}, {"ms", ms}};
    }
    ThreadFault slow(std::string(repo_points::after_db_read), fault::pause(kLoadSlowRead), -1);
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(args["duration_ms"].get<int>());
    json loads = json::array();
    Samples read_ms;
    auto start = wall_us();
    while (std::chrono::steady_clock::now() < until) {
        const auto before = repo.metrics().loads;
        auto t0 = std::chrono::steady_clock::now();
        const auto s = wall_us();
        repo.get(id);
        const auto e = wall_us();
        read_ms.add(ms_between(t0, std::chrono::steady_clock::now()));
        if (repo.metrics().loads > before) loads.push_back({s, e});
    }
    auto m = repo.metrics();
    return {{"loads", loads},         {"read_ms", read_ms.to_json()}, {"start_us", start},
            {"end_us", wall_us()},    {"guard_waits", m.guard_waits}, {"guard_timeouts", m.guard_timeouts},
            {"hits", m.hits}};
}

int reader_count(const DemoOptions& o) { return std::min(64, std::max(8, 4 * o.workers())); }

Trial forced_trial(DemoContext& ctx, bool guard) {
    const auto id = ctx.new_ids();
    insert_product(ctx.services().db(), id, 10, "hot item");
    const int n = reader_count(ctx.options());
    json args = {{"forced", true}, {"product", id}, {"guard", guard}, {"tag", ctx.unique("stampede")}, {"parties", n}};
    auto results = run_workers(ctx, std::vector<WorkerSpec>(n, WorkerSpec{"stampede.reader", args}));
    long long loads = 0, waits = 0;
    Samples ms;
    for (const auto& r : results) {
        loads += r["loads"].get<long long>();
        waits += r["guard_waits"].get<long long>();
        ms.add(r["ms"].get<double>());
    }
    Trial t;
    t.reproduced = loads > 1;
    t.evidence = std::to_string(n) + " readers missed the hot key at once: " + std::to_string(loads) +
                 " database load" + (loads == 1 ? "" : "s") + (waits > 0 ? ", " + std::to_string(waits) + " waited for it" : "") +
                 " (each load " + std::to_string(kForcedSlowRead.count()) + " ms)";
    t.metrics = {{"readers", n},
                 {"db_loads", static_cast<double>(loads)},
                 {"guard_waits", static_cast<double>(waits)},
                 {"read_p50_ms", ms.percentile(50)},
                 {"read_max_ms", ms.max()}};
    return t;
}

void load_case(DemoContext& ctx, bool guard, Result r) {
    const auto id = ctx.new_ids();
    insert_product(ctx.services().db(), id, 10, "hot item");
    const int workers = ctx.options().workers();
    const int duration_ms = ctx.options().iterations * 5;
    ctx.progress(std::string(kScenario) + ": load, " + guard_label(guard) + ": " + std::to_string(workers) +
                 " readers for " + std::to_string(duration_ms) + " ms on one key living " +
                 std::to_string(kLoadTtl.count()) + " ms");
    json args = {{"forced", false}, {"product", id}, {"guard", guard}, {"duration_ms", duration_ms}};
    auto results = run_workers(ctx, std::vector<WorkerSpec>(workers, WorkerSpec{"stampede.reader", args}));
    std::vector<std::pair<std::int64_t, std::int64_t>> loads;
    Samples read_ms;
    std::int64_t start = INT64_MAX, end = 0;
    long long waits = 0, timeouts = 0;
    for (const auto& r : results) {
        for (const auto& l : r["loads"]) loads.emplace_back(l[0].get<std::int64_t>(), l[1].get<std::int64_t>());
        read_ms.merge(Samples::from_json(r["read_ms"]));
        start = std::min(start, r["start_us"].get<std::int64_t>());
        end = std::max(end, r["end_us"].get<std::int64_t>());
        waits += r["guard_waits"].get<long long>();
        timeouts += r["guard_timeouts"].get<long long>();
    }
    // A load that began while another load of the key was still running was redundant.
    std::sort(loads.begin(), loads.end());
    long long redundant = 0;
    std::int64_t busy_until = 0;
    for (const auto& [s, e] : loads) {
        if (s < busy_until) ++redundant;
        busy_until = std::max(busy_until, e);
    }
    const double seconds = std::max(1e-6, static_cast<double>(end - start) / 1e6);
    r.observed = redundant > 0 ? Outcome::Reproduced : Outcome::Prevented;
    r.evidence = std::to_string(loads.size()) + " database loads, " + std::to_string(redundant) +
                 " of them while another load of the key ran" + (waits > 0 ? "; " + std::to_string(waits) + " reads waited for a loader" : "");
    r.cost = fixed1(static_cast<double>(loads.size()) / seconds) + " DB loads/s, " +
             fixed1(static_cast<double>(read_ms.size()) / seconds) + " reads/s, read p99 " + fixed2(read_ms.percentile(99)) + " ms";
    r.metric("reads", static_cast<double>(read_ms.size()))
        .metric("db_loads", static_cast<double>(loads.size()))
        .metric("redundant_loads", static_cast<double>(redundant))
        .metric("guard_waits", static_cast<double>(waits))
        .metric("guard_timeouts", static_cast<double>(timeouts))
        .metric("db_loads_per_s", static_cast<double>(loads.size()) / seconds)
        .metric("reads_per_s", static_cast<double>(read_ms.size()) / seconds)
        .metric("read_p50_ms", read_ms.percentile(50))
        .metric("read_p99_ms", read_ms.percentile(99))
        .metric("seconds", seconds);
    ctx.add(std::move(r));
}

void forced_rows(DemoContext& ctx, const RaceCase& c) {
    for (bool guard : {false, true}) {
        if (auto base = ctx.row(c, guard_label(guard), Mode::Forced)) {
            record_forced(ctx, std::move(*base), [&](int) { return forced_trial(ctx, guard); });
        }
    }
}

void load_rows(DemoContext& ctx, const RaceCase& c) {
    for (bool guard : {false, true}) {
        if (auto r = ctx.row(c, guard_label(guard), Mode::Load)) load_case(ctx, guard, std::move(*r));
    }
}

}  // namespace

void add_stampede() {
    add_scenario({kScenario,
                           "many readers miss one hot key at once: without the guard each queries the database, with "
                           "it one loads and the rest wait for its value",
                  {}});
    roles()["stampede.reader"] = reader;
}

void add_race_c6() {
    RaceCase c{kScenario, "C6", "N readers meet, then all read one missing hot key; the database read is slowed to 200 ms so every one misses before any value lands", {"reader 1..N: meets the others, reads the hot key"}, "every worker reads one hot key living 50 ms for --iterations x 5 ms; loads that overlapped another load of the key", {}, forced_rows, load_rows};
    for (Mode mode : {Mode::Forced, Mode::Load}) {
        for (bool guard : {false, true}) {
            c.rows.push_back({guard_label(guard), mode, guard ? Outcome::Prevented : Outcome::Reproduced});
        }
    }
    add_race(std::move(c));
}

}  // namespace lockstep::demo
