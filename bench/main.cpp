// lockstep-bench: every benchmark of the issue in one process run, each next to its raw
// baseline, then one table (benchmark, ours, baseline, ratio, target, met, notes) on stdout.
//
//   lockstep-bench [--quick] [--runs N] [--json FILE] [--strict] [--scale] [--load N]
//                  [--benchmark_filter=REGEX] [other Google Benchmark flags]
//
// Progress (Google Benchmark's own lines, one per repetition) goes to stderr. Ours and its
// baseline repeat interleaved at random (--benchmark_enable_random_interleaving), so drift on a
// shared machine hits both; each figure is the median over repetitions. --runs N repeats the
// whole table N times and adds a summary: each ratio's median and range over the runs, and the
// load average at the start and end of each run. --strict exits 1 when a target is missed (in
// the median of the runs). --scale runs the scale family instead of the table (bench_scale.cpp).
// --load N runs N busy threads beside the benchmarks for the whole run (background_load.h).
#include <sys/utsname.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "background_load.h"
#include "environment.h"
#include "families.h"
#include "lockstep/core/error.h"
#include "report.h"

namespace lockstep::bench {
namespace {

// Console lines to stderr (progress), every run also into Results.
class CollectingReporter final : public benchmark::ConsoleReporter {
public:
    explicit CollectingReporter(Results& results) : ConsoleReporter(OO_Tabular), results_(results) {}
    void ReportRuns(const std::vector<Run>& runs) override {
        for (const auto& run : runs) results_.add(run);
        ConsoleReporter::ReportRuns(runs);
    }

private:
    Results& results_;
};

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) == 0) {
            auto colon = line.find(':');
            if (colon != std::string::npos) return line.substr(colon + 2);
        }
    }
    return "unknown CPU";
}

std::string utc_now() {
    std::time_t t = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
    return buf;
}

double load_average() {
    double load[1] = {0};
    return getloadavg(load, 1) == 1 ? load[0] : 0;
}

void usage() {
    std::cout
        << "usage: lockstep-bench [--quick] [--runs N] [--json FILE] [--strict] [--scale] [--load N]\n"
           "                      [Google Benchmark flags]\n"
           "  --quick      fewer and shorter repetitions (about a minute)\n"
           "  --runs N     the whole table N times, then each ratio's median and range (min-max)\n"
           "  --json FILE  also write the table, the machine and every repetition as JSON\n"
           "  --strict     exit 1 when a target is missed\n"
           "  --scale      the scale family instead of the table: cost per operation as the work grows\n"
           "  --load N     N busy-loop threads beside the benchmarks for the whole run (0-64)\n"
           "Servers: private redis-server and mariadbd unless LOCKSTEP_REDIS_URL / LOCKSTEP_MYSQL_URL.\n";
}

int run(int argc, char** argv) {
    bool quick = false, strict = false, scale = false, filtered = false;
    int run_count = 1, load_threads = 0;
    std::string json_path;
    std::vector<std::string> gb_args = {argv[0], "--benchmark_enable_random_interleaving=true"};
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--quick") {
            quick = true;
        } else if (a == "--strict") {
            strict = true;
        } else if ((a == "--runs" && i + 1 < argc) || a.rfind("--runs=", 0) == 0) {
            const std::string n = a == "--runs" ? argv[++i] : a.substr(7);
            char* end = nullptr;
            const long v = std::strtol(n.c_str(), &end, 10);
            if (n.empty() || *end != '\0' || v < 1 || v > 100) {
                std::cerr << "lockstep-bench: --runs wants a count from 1 to 100, not '" << n << "'\n";
                return 2;
            }
            run_count = static_cast<int>(v);
        } else if (a == "--scale") {
            scale = true;
        } else if ((a == "--load" && i + 1 < argc) || a.rfind("--load=", 0) == 0) {
            const std::string n = a == "--load" ? argv[++i] : a.substr(7);
            char* end = nullptr;
            const long v = std::strtol(n.c_str(), &end, 10);
            if (n.empty() || *end != '\0' || v < 0 || v > 64) {
                std::cerr << "lockstep-bench: --load wants a thread count from 0 to 64, not '" << n << "'\n";
                return 2;
            }
            load_threads = static_cast<int>(v);
        } else if (a == "--json" && i + 1 < argc) {
            json_path = argv[++i];
        } else if (a.rfind("--json=", 0) == 0) {
            json_path = a.substr(7);
        } else if (a == "--help" || a == "-h") {
            usage();
            return 0;
        } else {
            filtered = filtered || a.rfind("--benchmark_filter", 0) == 0;
            gb_args.push_back(a);
        }
    }

    Environment env(quick ? Budget::quick_run() : Budget::full());
    Plan plan;
    if (scale) {
#if LOCKSTEP_BENCH_HAS_STRATEGIES
        register_scale(env, plan);
#if LOCKSTEP_BENCH_HAS_INVALIDATION
        register_scale_follower_backlog(env, plan);
#endif
        if (!filtered) gb_args.emplace_back("--benchmark_filter=^scale/");
#else
        plan.add_not_built(row_order::kScale, "scale", "≤ 1.2×",
                           "lockstep was built without its locks or strategies layer (LOCKSTEP_DEV_LAYERS)");
        gb_args.emplace_back("--benchmark_filter=^scale/");
#endif
    } else {
        register_db_authority(env, plan);
#if LOCKSTEP_BENCH_HAS_LOCKS
        register_lock_cycle(env, plan);
        register_hold_cycle(env, plan);
        register_redlock(env, plan);
        register_handover(env, plan);
        register_oversell(env, plan);
        register_fairness(env, plan);
        if (filtered) register_fairness_sweep(env);
        register_lock_backends(env, plan);
        register_cluster(env, plan);
        register_loss_detection(env, plan);
        register_tls(env, plan);
#else
        const std::string no_locks = "lockstep was built without its locks layer (LOCKSTEP_DEV_LAYERS)";
        plan.add_not_built(row_order::kLockCycle, "uncontended lock cycle", "≤ 1.15×", no_locks);
        plan.add_not_built(row_order::kFairCycle, "redis-fair: uncontended lock cycle", "≤ 1.15×", no_locks);
        plan.add_not_built(row_order::kHoldCycle, "movable Hold cycle", "≤ 1.05×", no_locks);
        plan.add_not_built(row_order::kRedlock, "Redlock lock cycle, 5 masters", "≤ 1.3×", no_locks);
        plan.add_not_built(row_order::kHandover, "contended hand-over", "≥ 0.8×", no_locks);
        plan.add_not_built(row_order::kOversell, "segmented oversell", "≥ 4×", no_locks);
#endif
#if LOCKSTEP_BENCH_HAS_COORDINATION
        register_coordination(env, plan);
#else
        plan.add_not_built(row_order::kCoordination, "redis: job slot ÷ lock cycle", "≤ 1.2×",
                           "lockstep was built without its coordination layer (LOCKSTEP_DEV_LAYERS)");
#endif
#if LOCKSTEP_BENCH_HAS_STRATEGIES
        register_cache_hit(env, plan);
        register_writer(env, plan);
        register_stampede(env, plan);
        register_mixed(env, plan);
        register_memory(env, plan);
        register_codec(env, plan);
        register_outbox(env, plan);
        register_near_cache(env, plan);
#endif
#if LOCKSTEP_BENCH_HAS_INVALIDATION
        register_follower(env, plan);
        register_follower_failover(env, plan);
#else
        plan.add_not_built(row_order::kFollower, "follower lag", "lag p99 ≤ 1 ms", "lockstep was built without its invalidation layer");
#endif
#if !LOCKSTEP_BENCH_HAS_STRATEGIES
        const std::string no_strategies = "lockstep was built without its strategies layer (LOCKSTEP_DEV_LAYERS)";
        plan.add_not_built(row_order::kCacheHit, "cache hit", "≤ 1.05×", no_strategies);
        plan.add_not_built(row_order::kWriter, "double-delete writer", "≤ 1.05×", no_strategies);
        plan.add_not_built(row_order::kStampede, "stampede", "exactly 1", no_strategies);
        plan.add_not_built(row_order::kMixed, "mixed load", "shown", no_strategies);
#endif
    }

    std::vector<char*> gb_argv;
    for (auto& s : gb_args) gb_argv.push_back(s.data());
    int gb_argc = static_cast<int>(gb_argv.size());
    benchmark::Initialize(&gb_argc, gb_argv.data());
    if (benchmark::ReportUnrecognizedArguments(gb_argc, gb_argv.data())) return 2;

    Machine machine;
    machine.cores = static_cast<int>(std::thread::hardware_concurrency());
    machine.cpu = cpu_model();
    machine.redis_version = env.redis_version();
    machine.mariadb_version = env.mariadb_version();
    machine.private_servers = env.private_servers();
    machine.quick = quick;
    machine.load_threads = load_threads;

    // --load N: busy threads from here to the end of the last run.
    BackgroundLoad load(load_threads);

    // --runs N: the whole table N times over the same servers; every run is printed, then the
    // summary (each ratio's median and range over the runs).
    std::vector<RunOfTable> runs;
    for (int i = 0; i < run_count; ++i) {
        progress(std::string("running") + (quick ? " (--quick)" : "") +
                 (run_count > 1 ? " run " + std::to_string(i + 1) + " of " + std::to_string(run_count) : "") +
                 "; one line per repetition follows, ours and baselines interleaved at random");
        RunOfTable run;
        run.machine = machine;
        run.machine.load_start = load_average();
        const double load_cpu0 = load.cpu_seconds();
        const auto wall0 = std::chrono::steady_clock::now();
        Results results;
        CollectingReporter reporter(results);
        reporter.SetOutputStream(&std::cerr);
        reporter.SetErrorStream(&std::cerr);
        benchmark::RunSpecifiedBenchmarks(&reporter);
        run.machine.date = utc_now();
        run.machine.load_average = load_average();
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
        run.machine.load_cores = wall > 0 ? (load.cpu_seconds() - load_cpu0) / wall : 0;
        run.rows = plan.rows(results);
        run.benchmarks = results.to_json();
        std::cout << "\n";
        if (run_count > 1) std::cout << "run " << i + 1 << " of " << run_count << ": ";
        print_table(std::cout, run.machine, run.rows);
        std::cout.flush();
        runs.push_back(std::move(run));
    }
    load.stop();
    const auto summary = summarize(runs);
    if (run_count > 1) print_summary(std::cout, runs, summary);
    std::cout.flush();
    if (!json_path.empty()) {
        std::ofstream out(json_path);
        out << to_json(runs, summary).dump(2) << "\n";
        if (!out) {
            std::cerr << "lockstep-bench: cannot write " << json_path << "\n";
            return 2;
        }
        progress("wrote " + json_path);
    }
    // The registered lambdas own repositories and locks that borrow the environment's clients.
    benchmark::ClearRegisteredBenchmarks();
    benchmark::Shutdown();

    // Judged on the median of the runs (one run: that run).
    bool failed = false, missed = false;
    for (const auto& run : runs)
        for (const auto& r : run.rows) failed = failed || r.verdict == Verdict::Failed;
    for (const auto& s : summary) missed = missed || s.verdict == Verdict::Missed;
    if (failed) return 2;
    return strict && missed ? 1 : 0;
}

}  // namespace
}  // namespace lockstep::bench

int main(int argc, char** argv) {
#if LOCKSTEP_BENCH_HAS_LOCKS
    if (argc > 1 && std::strcmp(argv[1], "--handover-worker") == 0) {
        return lockstep::bench::handover_worker_main(argc, argv);
    }
#endif
#if LOCKSTEP_BENCH_HAS_COORDINATION
    if (argc > 1 && std::strcmp(argv[1], "--leader-worker") == 0) {
        return lockstep::bench::leader_worker_main(argc, argv);
    }
#endif
    try {
        return lockstep::bench::run(argc, argv);
    } catch (const std::exception& e) {
        std::cerr << "lockstep-bench: " << e.what() << "\n";
        return 2;
    }
}
