// The scale family (lockstep-bench --scale): what one operation costs as the work grows, each
// size as a ratio against the smallest size of the same curve measured in the same run. The
// target is the same for every curve: flat within 1.2× of its smallest size; a row that misses
// it says, in its notes, which resource grew (measured: Redis memory and server time, round
// trips, CPU of the thread doing the work), not a guess.
//
//   cache hits    CachedRepository::get of warm entries, over 10, 1k and 100k distinct hot keys
//                 (all three sets in Redis at once, timed call by call in one loop, paired.h)
//   holds         1, 100, 1k, 10k RedisMutex holds kept by one lock client: the watchdog
//                 thread's CPU per hold per second, and its renewal round trips per second
//   waiters       1, 10, 100, 1k threads waiting on one name while one holds it (RedisMutex
//                 without the local gate, so each is a waiter in Redis), and 1, 10, 100 on the
//                 fair mutex: hand-over p50 / p99; wake-ups per release (RedisMutex)
//   processes     1, 2, 4, 8 processes (children `lockstep-bench --handover-worker`, one thread
//                 each) on one name and on a name each: lock cycles per second per process
//
// The waiter and process curves measure all their sizes back to back inside each repetition
// (measure_sizes), so that the load of the shared machine moves every size of a repetition alike.
#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "contenders.h"
#include "families.h"
#include "handover_worker.h"
#include "lockstep/core/error.h"
#include "lockstep/core/uri.h"
#include "lockstep/locks/hold.h"
#include "lockstep/locks/redis_fair_lock_service.h"
#include "lockstep/locks/redis_mutex.h"
#include "lockstep/strategies/binary_codec.h"
#include "lockstep/strategies/cache_entry.h"
#include "paired.h"
#include "repositories.h"


namespace lockstep::bench {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr double kFlat = 1.2;  // every curve: within 1.2× of its smallest size
constexpr std::array<int, 3> kHotKeys = {10, 1000, 100000};
constexpr std::array<int, 4> kHolds = {1, 100, 1000, 10000};
constexpr std::array<int, 4> kRedisWaiters = {1, 10, 100, 1000};
constexpr std::array<int, 3> kFairWaiters = {1, 10, 100};
constexpr std::array<int, 4> kProcesses = {1, 2, 4, 8};

// How long the throughput-like curves run: as many repetitions as the table's throughput rows,
// shorter windows, so that the whole family stays under three minutes on the 2-core machine.
struct ScaleBudget {
    int repetitions;
    milliseconds holds_window;
    milliseconds waiters_window;
    milliseconds processes_window;
};

// Hold windows are whole renewal periods (lease/3 = 400 ms), so that renewals per second are not
// rounded by where a window starts.
ScaleBudget scale_budget(const Budget& b) {
    if (b.quick) return {1, milliseconds(1200), milliseconds(400), milliseconds(300)};
    return {b.throughput_repetitions, milliseconds(2000), milliseconds(750), milliseconds(500)};
}

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
    return v[std::min(i, v.size() - 1)];
}

std::string count_label(int n) {
    if (n >= 1000 && n % 1000 == 0) return std::to_string(n / 1000) + "k";
    return std::to_string(n);
}

// ---- what the machine spent -------------------------------------------------------------

// Thread ids of this process now.
std::set<pid_t> thread_ids() {
    std::set<pid_t> out;
    if (DIR* d = ::opendir("/proc/self/task")) {
        while (dirent* e = ::readdir(d)) {
            if (e->d_name[0] != '.') out.insert(static_cast<pid_t>(std::atoi(e->d_name)));
        }
        ::closedir(d);
    }
    return out;
}

// CPU seconds one thread of this process has run: /proc/self/task/<tid>/schedstat (nanoseconds);
// where the kernel has no schedstat, utime + stime from .../stat (clock ticks).
double thread_cpu_seconds(pid_t tid) {
    const std::string dir = "/proc/self/task/" + std::to_string(tid);
    {
        std::ifstream in(dir + "/schedstat");
        long long ns = 0;
        if (in >> ns) return static_cast<double>(ns) / 1e9;
    }
    return stat_file_cpu_seconds(dir + "/stat");
}

double threads_cpu_seconds(const std::vector<pid_t>& tids) {
    double s = 0;
    for (pid_t t : tids) s += thread_cpu_seconds(t);
    return s;
}

long long redis_used_memory(Environment& env) {
    const std::string info = env.redis().command({"INFO", "memory"}).str();
    const std::string field = "used_memory:";
    const auto at = info.find(field);
    return at == std::string::npos ? 0 : std::stoll(info.substr(at + field.size()));
}

// What Redis did during a window: CPU (INFO cpu), calls of the commands the curves count.
struct ServerSnapshot {
    double redis_cpu = 0;
    double machine_busy = 0;
    std::map<std::string, Environment::CommandStat> commands;
    long long calls(const std::string& c) const {
        auto it = commands.find(c);
        return it == commands.end() ? 0 : it->second.calls;
    }
    long long usec(const std::string& c) const {
        auto it = commands.find(c);
        return it == commands.end() ? 0 : it->second.usec;
    }
};

ServerSnapshot server_snapshot(Environment& env) {
    ServerSnapshot s;
    s.redis_cpu = env.redis_cpu_seconds();
    s.machine_busy = machine_busy_seconds();
    s.commands = env.command_stats();
    return s;
}

// ---- rows ---------------------------------------------------------------------------------

// One point of a curve against the curve's smallest size. `lower_is_better`: a cost (≤ 1.2×);
// else a rate (≥ 1/1.2 of the smallest size's).
TableRow curve_row(double value, double smallest, bool lower_is_better, const std::string& ours,
                   const std::string& baseline) {
    TableRow row;
    row.ours = ours;
    row.baseline = baseline;
    row.target = lower_is_better ? "≤ 1.2×" : "≥ 0.83×";
    if (smallest <= 0) {
        row.ratio = "—";
        row.verdict = Verdict::Shown;
    } else {
        const double ratio = value / smallest;
        row.ratio = times(ratio);
        row.verdict = (lower_is_better ? ratio <= kFlat : ratio >= 1 / kFlat) ? Verdict::Met : Verdict::Missed;
        row.data["ratio"] = ratio;
    }
    row.data["value"] = value;
    row.data["smallest_size_value"] = smallest;
    return row;
}

using Measures = std::map<std::string, double>;

std::string at(const std::string& counter, int n) {
    return counter + "@" + std::to_string(n);
}

// Every size of a curve measured back to back inside one repetition, smallest to largest and
// back again (1, 10, 100, 100, 10, 1): drift of the shared machine during a repetition hits every
// size alike, as in a paired loop, and each figure is the mean of its two visits. Counters are
// named "<measure>@<size>".
template <class Sizes, class Measure>
void measure_sizes(benchmark::State& state, const Sizes& sizes, Measure measure) {
    Measures mean;
    const std::size_t k = sizes.size();
    for (std::size_t i = 0; i < 2 * k; ++i) {
        const int n = sizes[i < k ? i : 2 * k - 1 - i];
        for (const auto& [name, v] : measure(n)) mean[at(name, n)] += v / 2;
    }
    for (const auto& [name, v] : mean) state.counters[name] = v;
}

// The median over repetitions of each repetition's own ratio: its value at size n ÷ at size n0.
double median_ratio(const Results& r, const std::string& bench, const std::string& counter, int n, int n0) {
    std::vector<double> v;
    for (int i = 0; i < r.repetitions(bench); ++i) {
        const double b = r.counter_at(bench, at(counter, n0), i);
        if (b > 0) v.push_back(r.counter_at(bench, at(counter, n), i) / b);
    }
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size();
    return m % 2 == 1 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2;
}

// A point of a curve measured by measure_sizes: medians of the value at n and at the smallest
// size n0 for the columns, the median of the per-repetition ratios for the ratio.
TableRow sized_row(const Results& r, const std::string& bench, const std::string& counter, int n, int n0,
                   bool lower_is_better, const std::function<std::string(double)>& show,
                   const std::string& smallest_label) {
    const double v = r.counter(bench, at(counter, n));
    const double b = r.counter(bench, at(counter, n0));
    TableRow row = curve_row(v, b, lower_is_better, show(v), show(b) + " " + smallest_label);
    const double ratio = median_ratio(r, bench, counter, n, n0);
    if (b > 0 && ratio > 0) {
        row.ratio = times(ratio);
        row.verdict =
            (lower_is_better ? ratio <= kFlat : ratio >= 1 / kFlat) ? Verdict::Met : Verdict::Missed;
        row.data["ratio"] = ratio;
    }
    return row;
}

// ---- cache hits over many hot keys --------------------------------------------------------

// The warm entries of the cache curve: ids no product row has (they never reach the database),
// one set per size, each visited in its own shuffled order. Written when the benchmark first
// runs, deleted when the benchmarks are cleared.
struct HotKeys {
    Environment* env = nullptr;
    std::shared_ptr<ProductRepository> repo;
    std::vector<std::vector<std::int64_t>> sets;  // per kHotKeys entry, shuffled
    std::vector<long long> memory_per_key;        // Redis used_memory growth per key, per set
    bool filled = false;

    void fill() {
        if (filled) return;
        const BinaryCodec<Product> codec;
        std::int64_t next = 8'000'000'000'000LL + static_cast<std::int64_t>(::getpid()) * 1'000'000;
        std::mt19937_64 shuffle(42);
        for (int n : kHotKeys) {
            std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
            std::iota(ids.begin(), ids.end(), next);
            next += n;
            const long long before = redis_used_memory(*env);
            for (std::size_t at = 0; at < ids.size(); at += 1000) {
                std::vector<std::vector<std::string>> commands;
                for (std::size_t i = at; i < std::min(ids.size(), at + 1000); ++i) {
                    const Product p{ids[i], "bench item " + std::to_string(ids[i]), 1999, 1'000'000, 1};
                    commands.push_back({"SET", repo->key_of(ids[i]), CacheEntry::encode_value(1, codec.encode(p)),
                                        "PX", "3600000"});
                }
                for (const auto& reply : env->redis().pipeline(commands)) {
                    if (reply.is_error()) throw Error("scale cache: SET failed: " + reply.error_message());
                }
            }
            memory_per_key.push_back((redis_used_memory(*env) - before) / n);
            std::shuffle(ids.begin(), ids.end(), shuffle);
            sets.push_back(std::move(ids));
        }
        filled = true;
    }

    ~HotKeys() {
        try {
            for (const auto& ids : sets) {
                for (std::size_t at = 0; at < ids.size(); at += 1000) {
                    std::vector<std::vector<std::string>> commands;
                    for (std::size_t i = at; i < std::min(ids.size(), at + 1000); ++i)
                        commands.push_back({"UNLINK", repo->key_of(ids[i])});
                    env->redis().pipeline(commands);
                }
            }
        } catch (const std::exception&) {
            // Best effort: the entries expire within the hour anyway.
        }
    }
};

std::string hot_op(int n) {
    return "keys_" + std::to_string(n);
}

void register_cache_curve(Environment& env, Plan& plan) {
    constexpr const char* kBench = "scale/cache_hit/paired";
    const Budget& b = env.budget();
    auto keys = std::make_shared<HotKeys>();
    keys->env = &env;
    keys->repo = make_repository(env, std::make_shared<WriteThenDelete>());
    Environment* envp = &env;

    benchmark::RegisterBenchmark(kBench, [keys, envp](benchmark::State& state) {
        try {
            keys->fill();
        } catch (const std::exception& e) {
            state.SkipWithError(e.what());
            for (auto _ : state) {
            }
            return;
        }
        std::vector<std::size_t> cursor(kHotKeys.size(), 0);
        std::vector<TimedOp> ops;
        for (std::size_t s = 0; s < kHotKeys.size(); ++s) {
            ops.push_back({hot_op(kHotKeys[s]), [keys, s, &cursor] {
                               const auto& ids = keys->sets[s];
                               benchmark::DoNotOptimize(keys->repo->get(ids[cursor[s]++ % ids.size()]));
                           }});
        }
        const auto before = keys->repo->metrics();
        run_paired(state, ops);
        if (keys->repo->metrics().misses != before.misses) {
            state.SkipWithError("a get missed the cache: not a hit benchmark");
            return;
        }
        // The server's own time per GET, per set: 2,000 gets of each set on their own.
        for (std::size_t s = 0; s < kHotKeys.size(); ++s) {
            const auto a = server_snapshot(*envp);
            constexpr int kGets = 2000;
            for (int i = 0; i < kGets; ++i) {
                const auto& ids = keys->sets[s];
                benchmark::DoNotOptimize(keys->repo->get(ids[cursor[s]++ % ids.size()]));
            }
            const auto z = server_snapshot(*envp);
            state.counters["server_us_per_get_" + std::to_string(kHotKeys[s])] =
                static_cast<double>(z.usec("get") - a.usec("get")) / std::max(1LL, z.calls("get") - a.calls("get"));
        }
        for (std::size_t s = 0; s < kHotKeys.size(); ++s)
            state.counters["redis_bytes_per_key_" + std::to_string(kHotKeys[s])] =
                static_cast<double>(keys->memory_per_key[s]);
    })
        ->Unit(benchmark::kMicrosecond)
        ->MinTime(b.latency_min_time)
        ->Repetitions(b.latency_repetitions);

    const std::string smallest = hot_op(kHotKeys[0]);
    for (std::size_t s = 1; s < kHotKeys.size(); ++s) {
        const int n = kHotKeys[s];
        plan.add(row_order::kScale, "scale: cache hit, " + count_label(n) + " hot keys", "≤ 1.2×", {kBench},
                 [n, smallest](const Results& r) {
                     const MedianRepetition m(r, kBench, hot_op(n), smallest);
                     TableRow row = paired_latency_row(m, hot_op(n), smallest, kFlat,
                                                       "get over " + count_label(n) + " keys",
                                                       "over " + count_label(kHotKeys[0]));
                     row.target = "≤ 1.2×";
                     const auto server = [&](int k) {
                         return m.counter("server_us_per_get_" + std::to_string(k));
                     };
                     row.notes = "CachedRepository::get, each set visited in its own shuffled order, the three "
                                 "sets (" + std::to_string(10 + 1000 + 100000) +
                                 " keys) in Redis together and timed call by call in one loop; Redis time per "
                                 "GET (commandstats) " + fixed(server(n), 2) + " µs against " +
                                 fixed(server(kHotKeys[0]), 2) + " µs; Redis memory per entry " +
                                 fixed(m.counter("redis_bytes_per_key_" + std::to_string(n)), 0) + " B";
                     if (row.verdict == Verdict::Missed) {
                         row.notes += "; missed: the call grew by " +
                                      micros(m.seconds(hot_op(n)) - m.seconds(smallest)) +
                                      ", of which Redis's own time per GET " +
                                      fixed(server(n) - server(kHotKeys[0]), 2) +
                                      " µs (a lookup that leaves the CPU caches)";
                     }
                     row.data["redis_us_per_get"] = server(n);
                     row.data["redis_us_per_get_smallest"] = server(kHotKeys[0]);
                     row.data["hot_keys"] = n;
                     return row;
                 });
    }
}

// ---- holds kept by one process ------------------------------------------------------------

std::string holds_bench(int n) {
    return "scale/holds/" + std::to_string(n);
}

void register_holds_curve(Environment& env, Plan& plan, const ScaleBudget& sb) {
    // A short lease, so that a window sees several renewals of every hold (every lease/3).
    const milliseconds lease(1200);
    const milliseconds window = sb.holds_window;
    Environment* envp = &env;
    for (int n : kHolds) {
        benchmark::RegisterBenchmark(holds_bench(n).c_str(), [=](benchmark::State& state) {
            static std::atomic<int> round{0};
            for (auto _ : state) {
                try {
                    const std::string prefix = envp->prefix() + "scale-holds" + std::to_string(round++) + ":";
                    const auto before_threads = thread_ids();
                    LockClientOptions lo;
                    lo.prefix = prefix;
                    lo.fence_counter_ttl = std::chrono::minutes(1);
                    auto client = std::make_unique<RedisLockClient>(envp->redis(), lo);
                    // The client's own thread (the watchdog): the one that did not exist before it.
                    std::vector<pid_t> watchdog;
                    for (pid_t t : thread_ids())
                        if (before_threads.count(t) == 0) watchdog.push_back(t);
                    MutexOptions mo;
                    mo.lease = lease;
                    std::vector<std::unique_ptr<RedisMutex>> mutexes;
                    std::vector<Hold> holds;
                    mutexes.reserve(static_cast<std::size_t>(n));
                    holds.reserve(static_cast<std::size_t>(n));
                    const long long memory0 = redis_used_memory(*envp);
                    const auto t0 = Clock::now();
                    for (int i = 0; i < n; ++i) {
                        mutexes.push_back(std::make_unique<RedisMutex>(*client, "h" + std::to_string(i), mo));
                        holds.push_back(mutexes.back()->acquire());
                    }
                    const double acquire_s = std::chrono::duration<double>(Clock::now() - t0).count();
                    const long long memory1 = redis_used_memory(*envp);
                    // Every hold renewed once at least before the window opens.
                    std::this_thread::sleep_for(lease / 3);
                    const auto stats0 = client->stats();
                    const double cpu0 = threads_cpu_seconds(watchdog);
                    const auto server0 = server_snapshot(*envp);
                    std::this_thread::sleep_for(window);
                    const auto stats1 = client->stats();
                    const double cpu1 = threads_cpu_seconds(watchdog);
                    const auto server1 = server_snapshot(*envp);
                    for (auto& h : holds) h.release();
                    holds.clear();
                    mutexes.clear();
                    client.reset();

                    const double seconds = std::chrono::duration<double>(window).count();
                    const double dn = static_cast<double>(n);
                    const double batches = static_cast<double>(stats1.renew_batches - stats0.renew_batches);
                    const double renewals = static_cast<double>(stats1.renewals - stats0.renewals);
                    state.SetIterationTime(seconds);
                    state.counters["watchdog_cpu_us_per_hold_per_s"] = (cpu1 - cpu0) / dn / seconds * 1e6;
                    state.counters["round_trips_per_s"] = batches / seconds;
                    state.counters["renewals_per_hold_per_s"] = renewals / dn / seconds;
                    state.counters["holds_per_round_trip"] = batches > 0 ? renewals / batches : 0;
                    state.counters["redis_cpu_us_per_hold_per_s"] =
                        (server1.redis_cpu - server0.redis_cpu) / dn / seconds * 1e6;
                    state.counters["redis_bytes_per_hold"] = static_cast<double>(memory1 - memory0) / dn;
                    state.counters["acquire_s"] = acquire_s;
                    state.counters["losses"] = static_cast<double>(stats1.losses - stats0.losses);
                    state.counters["watchdog_threads"] = static_cast<double>(watchdog.size());
                } catch (const std::exception& e) {
                    state.SkipWithError(e.what());
                    break;
                }
            }
        })
            ->Iterations(1)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond)
            ->Repetitions(sb.repetitions);
    }

    const std::string base = holds_bench(kHolds[0]);
    for (std::size_t s = 1; s < kHolds.size(); ++s) {
        const int n = kHolds[s];
        const std::string bench = holds_bench(n);
        plan.add(row_order::kScale, "scale: " + count_label(n) + " holds, watchdog CPU per hold", "≤ 1.2×",
                 {bench, base}, [=](const Results& r) {
                     const double v = r.counter(bench, "watchdog_cpu_us_per_hold_per_s");
                     const double b = r.counter(base, "watchdog_cpu_us_per_hold_per_s");
                     TableRow row = curve_row(v, b, true, fixed(v, 2) + " µs/s per hold",
                                              fixed(b, 2) + " µs/s at 1 hold");
                     row.notes = "lease " + std::to_string(lease.count()) +
                                 " ms (renewed every lease/3); the watchdog thread's CPU (schedstat) per hold "
                                 "per second; Redis CPU per hold per second (all of Redis's CPU in the window, its idle cycle "
                                 "included) " +
                                 fixed(r.counter(bench, "redis_cpu_us_per_hold_per_s"), 2) + " µs (1 hold: " +
                                 fixed(r.counter(base, "redis_cpu_us_per_hold_per_s"), 1) + "); " +
                                 fixed(r.counter(bench, "holds_per_round_trip"), 0) +
                                 " holds per renewal round trip; Redis memory per hold " +
                                 fixed(r.counter(bench, "redis_bytes_per_hold"), 0) + " B; losses " +
                                 fixed(r.counter_max(bench, "losses"), 0);
                     if (row.verdict == Verdict::Missed)
                         row.notes += "; missed: the watchdog's per-hold work grew (it walks every hold at each "
                                      "wake-up to find the due ones)";
                     row.data["redis_cpu_us_per_hold_per_s"] = r.counter(bench, "redis_cpu_us_per_hold_per_s");
                     row.data["holds_per_round_trip"] = r.counter(bench, "holds_per_round_trip");
                     row.data["redis_bytes_per_hold"] = r.counter(bench, "redis_bytes_per_hold");
                     row.data["holds"] = n;
                     return row;
                 });
        plan.add(row_order::kScale, "scale: " + count_label(n) + " holds, renewal round trips", "≤ 1.2×",
                 {bench, base}, [=](const Results& r) {
                     const double v = r.counter(bench, "round_trips_per_s");
                     const double b = r.counter(base, "round_trips_per_s");
                     TableRow row = curve_row(v, b, true, fixed(v, 1) + " round trips/s",
                                              fixed(b, 1) + "/s at 1 hold");
                     const double acquire = r.counter(bench, "acquire_s");
                     row.notes = "renewals per hold per second " +
                                 fixed(r.counter(bench, "renewals_per_hold_per_s"), 2) + " (1 hold: " +
                                 fixed(r.counter(base, "renewals_per_hold_per_s"), 2) + "); " +
                                 fixed(r.counter(bench, "holds_per_round_trip"), 0) +
                                 " holds per round trip; acquiring them took " + fixed(acquire, 2) + " s";
                     if (row.verdict == Verdict::Missed) {
                         row.notes += "; missed: what grows is round trips, not holds per round trip: the " +
                                      count_label(n) + " holds were acquired over " + fixed(acquire, 2) +
                                      " s, so they fall due spread over the lease/3 period, and one round trip "
                                      "takes every hold due within lease/12 of the earliest: at most ~4 per "
                                      "lease/3 (12/lease per second) whatever the number of holds";
                     }
                     row.data["renewals_per_hold_per_s"] = r.counter(bench, "renewals_per_hold_per_s");
                     row.data["acquire_seconds"] = acquire;
                     row.data["holds"] = n;
                     return row;
                 });
    }
}

// ---- waiters on one name ------------------------------------------------------------------

struct WaitersOutcome {
    long long acquisitions = 0;
    long long same_thread = 0;
    std::vector<double> handovers;  // seconds, previous holder's unlock() called -> lock() returned
    std::string error;
};

// `mutexes.size()` threads (one holds, the rest wait) lock and unlock one name with an empty
// critical section from `start` to `end`. Hand-overs are counted between different threads only.
template <class M>
WaitersOutcome run_waiters(const std::vector<M*>& mutexes, Clock::time_point start, Clock::time_point end) {
    const std::size_t threads = mutexes.size();
    std::vector<long long> count(threads, 0), same(threads, 0);
    std::vector<std::vector<double>> handovers(threads);
    WaitersOutcome out;
    out.error = run_contenders(
        mutexes, start, end, [](M& m, Clock::time_point until) { return m.try_lock_until(until); },
        [&](std::size_t t, const ContenderTurn& turn) {
            ++count[t];
            if (turn.previous_holder == static_cast<int>(t)) {
                ++same[t];
            } else if (turn.previous_release_ns != 0) {
                handovers[t].push_back(static_cast<double>(steady_ns(turn.got) - turn.previous_release_ns) / 1e9);
            }
        });
    for (std::size_t t = 0; t < threads; ++t) {
        out.acquisitions += count[t];
        out.same_thread += same[t];
        out.handovers.insert(out.handovers.end(), handovers[t].begin(), handovers[t].end());
    }
    return out;
}

// This process's CPU seconds and context switches (every thread, ended ones included).
struct ProcessUsage {
    double cpu = 0;
    long long switches = 0;
};

ProcessUsage process_usage() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return {static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
                static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6,
            static_cast<long long>(u.ru_nvcsw) + static_cast<long long>(u.ru_nivcsw)};
}

// One window of `mutexes.size() - 1` waiters: hand-over percentiles and what each acquisition cost.
template <class M>
Measures waiters_window(Environment& env, const std::vector<M*>& mutexes, milliseconds window) {
    const auto start = Clock::now() + milliseconds(50) + std::chrono::microseconds(200) * mutexes.size();
    const auto end = start + window;
    const auto a = server_snapshot(env);
    const auto pa = process_usage();
    const WaitersOutcome o = run_waiters(mutexes, start, end);
    const auto pz = process_usage();
    const auto z = server_snapshot(env);
    if (!o.error.empty()) throw Error(o.error);
    const double seconds = std::chrono::duration<double>(window).count();
    const double acq = static_cast<double>(std::max(1LL, o.acquisitions));
    return {{"handover_p50_s", percentile(o.handovers, 0.50)},
            {"handover_p99_s", percentile(o.handovers, 0.99)},
            {"acquisitions_per_s", static_cast<double>(o.acquisitions) / seconds},
            {"same_thread", static_cast<double>(o.same_thread) / acq},
            {"spublish_per_release", static_cast<double>(z.calls("spublish") - a.calls("spublish")) / acq},
            {"scripts_per_acquisition", static_cast<double>(z.calls("evalsha") - a.calls("evalsha")) / acq},
            {"redis_cpu_us_per_acquisition", (z.redis_cpu - a.redis_cpu) / acq * 1e6},
            {"client_cpu_us_per_acquisition", (pz.cpu - pa.cpu) / acq * 1e6},
            {"switches_per_acquisition", static_cast<double>(pz.switches - pa.switches) / acq},
            {"cores_busy", (z.machine_busy - a.machine_busy) / seconds}};
}

void register_waiters_curve(Environment& env, Plan& plan, const ScaleBudget& sb) {
    constexpr const char* kRedisBench = "scale/waiters/redis";
    constexpr const char* kFairBench = "scale/waiters/fair";
    Environment* envp = &env;
    const milliseconds window = sb.waiters_window;
    // The fair mutex's service, one for every size (its own connections and channel).
    LockServiceOptions fair_options;
    fair_options.prefix = env.prefix() + "scale-fair:";
    auto fair = std::make_shared<RedisFairLockService>(env.redis_options(), fair_options);
    static std::atomic<int> round{0};

    benchmark::RegisterBenchmark(kRedisBench, [=](benchmark::State& state) {
        for (auto _ : state) {
            try {
                // Without the local gate every thread is a waiter in Redis, as n processes would be.
                LockClientOptions lo;
                lo.prefix = envp->prefix() + "scale-wait:";
                lo.local_gate = false;
                lo.fence_counter_ttl = std::chrono::minutes(1);
                RedisLockClient client(envp->redis(), lo);
                measure_sizes(state, kRedisWaiters, [&](int n) {
                    const std::string name = "w" + std::to_string(n) + "-" + std::to_string(round++);
                    std::vector<std::unique_ptr<RedisMutex>> owned;
                    std::vector<RedisMutex*> ms;
                    for (int i = 0; i <= n; ++i) {
                        owned.push_back(std::make_unique<RedisMutex>(client, name));
                        ms.push_back(owned.back().get());
                    }
                    const auto stats0 = client.stats();
                    Measures m = waiters_window(*envp, ms, window);
                    const auto stats1 = client.stats();
                    m["wakeups_per_release"] = static_cast<double>(stats1.wakeups - stats0.wakeups) /
                                               std::max(1.0, m["acquisitions_per_s"] *
                                                                 std::chrono::duration<double>(window).count());
                    return m;
                });
                state.SetIterationTime(2.0 * kRedisWaiters.size() * std::chrono::duration<double>(window).count());
            } catch (const std::exception& e) {
                state.SkipWithError(e.what());
                break;
            }
        }
    })
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->Repetitions(sb.repetitions);

    benchmark::RegisterBenchmark(kFairBench, [=](benchmark::State& state) {
        for (auto _ : state) {
            try {
                measure_sizes(state, kFairWaiters, [&](int n) {
                    const std::string name = "f" + std::to_string(n) + "-" + std::to_string(round++);
                    std::vector<std::unique_ptr<DistributedMutex>> owned;
                    std::vector<DistributedMutex*> ms;
                    for (int i = 0; i <= n; ++i) {
                        owned.push_back(fair->make_mutex(name));
                        ms.push_back(owned.back().get());
                    }
                    return waiters_window(*envp, ms, window);
                });
                state.SetIterationTime(2.0 * kFairWaiters.size() * std::chrono::duration<double>(window).count());
            } catch (const std::exception& e) {
                state.SkipWithError(e.what());
                break;
            }
        }
    })
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->Repetitions(sb.repetitions);

    auto add_rows = [&plan](const std::string& bench, const std::string& label, const auto& sizes, bool redis) {
        const int n0 = sizes[0];
        for (std::size_t s = 1; s < sizes.size(); ++s) {
            const int n = sizes[s];
            const std::string what = "scale: " + label + ", " + count_label(n) + " waiters";
            // Each resource per acquisition, at this size against 1 waiter.
            auto pair = [=](const Results& r, const std::string& counter, const std::string& name, int digits) {
                return name + " " + fixed(r.counter(bench, at(counter, n)), digits) + " (1 waiter: " +
                       fixed(r.counter(bench, at(counter, n0)), digits) + ")";
            };
            auto notes = [=](const Results& r) {
                std::string text = "1 holder + " + std::to_string(n) +
                                   " waiting threads, empty critical section, all sizes back to back in each "
                                   "repetition; hand-overs between different threads only; " +
                                   pair(r, "same_thread", "share of same-thread re-acquisitions", 2) + "; " +
                                   pair(r, "acquisitions_per_s", "acquisitions/s", 0);
                if (!redis)
                    text += "; " + pair(r, "spublish_per_release", "SPUBLISH per release", 2) +
                            " (every waiter is a thread of the releasing service, which hands the grant over "
                            "in-process)";
                return text;
            };
            auto measured = [=](const Results& r) {
                return "; missed; measured per acquisition: " +
                       pair(r, "scripts_per_acquisition", "acquire/release scripts", 2) + ", " +
                       pair(r, "redis_cpu_us_per_acquisition", "Redis CPU µs", 0) + ", " +
                       pair(r, "client_cpu_us_per_acquisition", "client CPU µs", 0) + ", " +
                       pair(r, "switches_per_acquisition", "context switches", 1) + "; " +
                       pair(r, "cores_busy", "machine cores busy", 2) + " of 2";
            };
            for (const char* q : {"p50", "p99"}) {
                const std::string counter = std::string("handover_") + q + "_s";
                plan.add(row_order::kScale, what + ": hand-over " + q, "≤ 1.2×", {bench}, [=](const Results& r) {
                    TableRow row = sized_row(r, bench, counter, n, n0, true, [](double v) { return micros(v); },
                                             "with 1 waiter");
                    row.notes = notes(r);
                    if (row.verdict == Verdict::Missed) row.notes += measured(r);
                    return row;
                });
            }
            if (!redis) continue;  // the fair service counts no wake-ups (its SPUBLISH count is in the notes)
            plan.add(row_order::kScale, what + ": wake-ups per release", "≤ 1.2×", {bench}, [=](const Results& r) {
                TableRow row = sized_row(r, bench, "wakeups_per_release", n, n0, true,
                                         [](double v) { return fixed(v, 2); }, "with 1 waiter");
                const double spublish1 = r.counter(bench, at("spublish_per_release", n0));
                row.notes = "waiters woken by a release message (the lock client's wakeups counter) per "
                            "acquisition; " + pair(r, "spublish_per_release", "SPUBLISH per release", 2);
                if (row.verdict == Verdict::Missed && r.counter(bench, at("wakeups_per_release", n)) <= 1.05) {
                    row.notes += "; missed against 1 waiter only: here every release woke one waiter (no "
                                 "herd); with 1 waiter " + fixed((1 - spublish1) * 100, 0) +
                                 "% of releases published nothing (no waiter was queued in Redis at that "
                                 "moment: the release script publishes to the head of the queue only)";
                } else if (row.verdict == Verdict::Missed) {
                    row.notes += "; missed: more than one wake-up per release";
                }
                return row;
            });
        }
    };
    add_rows(kRedisBench, "redis mutex (no local gate)", kRedisWaiters, true);
    add_rows(kFairBench, "fair mutex", kFairWaiters, false);
}

// ---- processes ----------------------------------------------------------------------------

// Reads a worker's line of results and reaps it; "" and `failure` set when it failed.
std::string finish_worker(testing::ChildProcess& worker, std::string& failure) {
    try {
        return finish_handover_worker(worker);
    } catch (const std::exception& e) {
        if (failure.empty()) failure = e.what();
        return "";
    }
}

long long worker_field(const std::string& line, const std::string& name) {
    std::istringstream in(line);
    std::string word;
    while (in >> word) {
        if (word.rfind(name + "=", 0) == 0) return std::stoll(word.substr(name.size() + 1));
    }
    throw Error("worker said '" + line + "': no " + name);
}

// One window of `p` child processes, one thread each, locking one name or a name each.
Measures processes_window(Environment& env, const RedisOptions& options, bool one_name, int p, milliseconds window) {
    static std::atomic<int> round{0};
    const std::string prefix = env.prefix() + "scale-proc" + std::to_string(round++) + ":";
    // Time for every child to start and connect before the window opens.
    const auto start = Clock::now() + milliseconds(200) + milliseconds(50) * p;
    const auto end = start + window;
    std::vector<std::unique_ptr<testing::ChildProcess>> children;
    std::string failure;
    try {
        for (int i = 0; i < p; ++i)
            children.push_back(
                spawn_handover_worker(options, prefix, one_name ? "one" : "n" + std::to_string(i), 1, start, end));
    } catch (const std::exception& e) {
        failure = e.what();
    }
    std::this_thread::sleep_until(start);
    const auto a = server_snapshot(env);
    std::this_thread::sleep_until(end);
    const auto z = server_snapshot(env);
    std::vector<std::string> lines;
    for (const auto& c : children) lines.push_back(finish_worker(*c, failure));
    if (!failure.empty()) throw Error(failure);
    double cycles = 0, cpu = 0, late = 0, fewest = 1e18, most = 0;
    for (const auto& line : lines) {
        const double c = static_cast<double>(worker_field(line, "cycles"));
        cycles += c;
        fewest = std::min(fewest, c);
        most = std::max(most, c);
        cpu += static_cast<double>(worker_field(line, "cpu_us")) / 1e6;
        late = std::max(late, static_cast<double>(worker_field(line, "late_ms")));
    }
    const double seconds = std::chrono::duration<double>(window).count();
    const double redis = z.redis_cpu - a.redis_cpu;
    return {{"cycles_per_s_per_process", cycles / p / seconds},
            {"cycles_per_s", cycles / seconds},
            {"fewest_share", cycles > 0 ? fewest * p / cycles : 0},
            {"most_share", cycles > 0 ? most * p / cycles : 0},
            {"client_cores", cpu / seconds},
            {"redis_cores", redis / seconds},
            {"others_cores", std::max(0.0, z.machine_busy - a.machine_busy - cpu - redis) / seconds},
            {"redis_cpu_us_per_cycle", cycles > 0 ? redis / cycles * 1e6 : 0},
            {"client_cpu_us_per_cycle", cycles > 0 ? cpu / cycles * 1e6 : 0},
            {"scripts_per_cycle",
             cycles > 0 ? static_cast<double>(z.calls("evalsha") - a.calls("evalsha")) / cycles : 0},
            {"latest_start_ms", late}};
}

void register_processes_curve(Environment& env, Plan& plan, const ScaleBudget& sb) {
    Environment* envp = &env;
    const RedisOptions options = env.redis_options();
    const milliseconds window = sb.processes_window;
    for (bool one_name : {true, false}) {
        const std::string bench = std::string("scale/processes/") + (one_name ? "one_name" : "distinct_names");
        benchmark::RegisterBenchmark(bench.c_str(), [=](benchmark::State& state) {
            for (auto _ : state) {
                try {
                    measure_sizes(state, kProcesses,
                                  [&](int p) { return processes_window(*envp, options, one_name, p, window); });
                    state.SetIterationTime(2.0 * kProcesses.size() * std::chrono::duration<double>(window).count());
                } catch (const std::exception& e) {
                    state.SkipWithError(e.what());
                    break;
                }
            }
        })
            ->Iterations(1)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond)
            ->Repetitions(sb.repetitions);

        const int p0 = kProcesses[0];
        for (std::size_t s = 1; s < kProcesses.size(); ++s) {
            const int p = kProcesses[s];
            plan.add(
                row_order::kScale,
                "scale: " + std::to_string(p) + " processes, " + (one_name ? "one name" : "a name each"),
                "≥ 0.83×", {bench}, [=](const Results& r) {
                    TableRow row = sized_row(r, bench, "cycles_per_s_per_process", p, p0, false,
                                             [](double v) { return per_second(v, "cycles"); }, "for 1 process");
                    auto v = [&](const std::string& c, int n) { return r.counter(bench, at(c, n)); };
                    const double client = v("client_cores", p);
                    const double redis = v("redis_cores", p);
                    row.notes = "one thread per process, all sizes back to back in each repetition; all processes " +
                                per_second(v("cycles_per_s", p), "cycles") + " (1 process: " +
                                per_second(v("cycles_per_s", p0), "cycles") + "); cores busy: the processes " +
                                fixed(client, 2) + " + Redis " + fixed(redis, 2) + " (1 process: " +
                                fixed(v("client_cores", p0), 2) + " + " + fixed(v("redis_cores", p0), 2) +
                                "), others " + fixed(v("others_cores", p), 2) + " of 2; per cycle: scripts " +
                                fixed(v("scripts_per_cycle", p), 2) + " (1: " + fixed(v("scripts_per_cycle", p0), 2) +
                                "), Redis CPU " + fixed(v("redis_cpu_us_per_cycle", p), 0) + " µs (1: " +
                                fixed(v("redis_cpu_us_per_cycle", p0), 0) + "), client CPU " +
                                fixed(v("client_cpu_us_per_cycle", p), 0) + " µs (1: " +
                                fixed(v("client_cpu_us_per_cycle", p0), 0) + "); per-process share " +
                                fixed(v("fewest_share", p), 2) + "–" + fixed(v("most_share", p), 2) +
                                "× the mean; latest child start " + fixed(r.counter_max(bench, at("latest_start_ms", p)), 0) +
                                " ms after the window opened";
                    if (row.verdict == Verdict::Missed) {
                        row.notes += one_name ? "; missed: one name is one critical section at a time: the "
                                                "processes share its cycles, so the total above is the figure "
                                                "that can stay flat, and each waiter adds acquire scripts per "
                                                "cycle"
                                              : "; missed; what grew: CPU: these processes and Redis kept " +
                                                    fixed(client + redis, 2) + " cores busy (1 process: " +
                                                    fixed(v("client_cores", p0) + v("redis_cores", p0), 2) +
                                                    ") and other processes " + fixed(v("others_cores", p), 2) +
                                                    " of the machine's 2; every cycle is a round trip through the "
                                                    "one Redis thread";
                    }
                    row.data["cycles_per_second_total"] = v("cycles_per_s", p);
                    row.data["client_cores"] = client;
                    row.data["redis_cores"] = redis;
                    row.data["others_cores"] = v("others_cores", p);
                    row.data["processes"] = p;
                    return row;
                });
        }
    }
}

}  // namespace

void register_scale(Environment& env, Plan& plan) {
    const ScaleBudget sb = scale_budget(env.budget());
    register_cache_curve(env, plan);
    register_holds_curve(env, plan, sb);
    register_waiters_curve(env, plan, sb);
    register_processes_curve(env, plan, sb);
    register_scale_entry_memory(env, plan);
}

}  // namespace lockstep::bench
