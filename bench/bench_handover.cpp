// Contended hand-over: 16 threads in 2 processes (this one and a child started as
// `lockstep-bench --handover-worker`), one lock, empty critical section, for a fixed window
// both processes agree on (CLOCK_MONOTONIC is system-wide). Cycles per second over all of them,
// against the cycles per second of one client locking and unlocking alone. Both sides also
// count what a cycle costs: acquire scripts, wake-ups, client and Redis CPU.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "families.h"
#include "handover_worker.h"
#include "lockstep/core/error.h"
#include "lockstep/core/uri.h"
#include "lockstep/locks/redis_mutex.h"


namespace lockstep::bench {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kThreadsPerProcess = 8;

struct CycleCount {
    long long cycles = 0;
    double cpu_seconds = 0;  // CPU time of this whole process (all threads) meanwhile
    long long switches = 0;  // context switches of this whole process (all threads) meanwhile
    std::string error;
};

// Context switches (voluntary and not) of this whole process, threads that already ended
// included: the cycling threads end before the count is read, so /proc/self/task (which lists
// only live threads, process_context_switches()) would miss them.
long long all_context_switches() {
    rusage u{};
    if (::getrusage(RUSAGE_SELF, &u) != 0) return 0;
    return static_cast<long long>(u.ru_nvcsw) + static_cast<long long>(u.ru_nivcsw);
}

// `threads` threads lock and unlock `m` from `start` until `end`; counts the cycles whose unlock
// returned before `end`.
CycleCount run_cycles(RedisMutex& m, int threads, Clock::time_point start, Clock::time_point end) {
    std::atomic<long long> total{0};
    std::mutex error_mutex;
    std::string error;
    std::vector<std::thread> pool;
    const double cpu0 = process_cpu_seconds();
    const long long switches0 = all_context_switches();
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&] {
            long long n = 0;
            try {
                std::this_thread::sleep_until(start);
                while (Clock::now() < end) {
                    m.lock();
                    m.unlock();
                    if (Clock::now() <= end) ++n;
                }
            } catch (const std::exception& e) {
                std::lock_guard g(error_mutex);
                error = e.what();
            }
            total += n;
        });
    }
    for (auto& th : pool) th.join();
    return {total.load(), process_cpu_seconds() - cpu0, all_context_switches() - switches0, error};
}

long long field(const std::string& line, const std::string& name) {
    std::istringstream in(line);
    std::string word;
    while (in >> word) {
        if (word.rfind(name + "=", 0) == 0) return std::stoll(word.substr(name.size() + 1));
    }
    throw Error("handover worker said '" + line + "': no " + name);
}

// What Redis spent during a window: CPU (INFO cpu) and EVALSHA calls and time (commandstats).
struct ServerUsage {
    double cpu_seconds = 0;
    Environment::CommandStat evalsha;
    double machine_busy = 0;  // all cores, all processes
};

ServerUsage server_usage(Environment& env) {
    ServerUsage u;
    u.cpu_seconds = env.redis_cpu_seconds();
    u.evalsha = env.command_stats()["evalsha"];
    u.machine_busy = machine_busy_seconds();
    return u;
}

// Per completed cycle: client CPU (all threads of the lock's processes), Redis CPU, scripts run.
void set_cost_counters(benchmark::State& state, double cycles, double client_cpu, const ServerUsage& a,
                       const ServerUsage& b, double seconds) {
    if (cycles <= 0) return;
    const double redis = b.cpu_seconds - a.cpu_seconds;
    state.counters["ours_cores"] = (client_cpu + redis) / seconds;
    state.counters["others_cores"] =
        std::max(0.0, b.machine_busy - a.machine_busy - client_cpu - redis) / seconds;
    state.counters["client_cpu_us_per_cycle"] = client_cpu / cycles * 1e6;
    state.counters["redis_cpu_us_per_cycle"] = (b.cpu_seconds - a.cpu_seconds) / cycles * 1e6;
    state.counters["scripts_per_cycle"] = static_cast<double>(b.evalsha.calls - a.evalsha.calls) / cycles;
}

}  // namespace

int handover_worker_main(int argc, char** argv) {
    try {
        if (argc != 7)
            throw ConfigError("handover worker", "usage: --handover-worker PREFIX LOCK THREADS START END");
        const char* url = std::getenv(kWorkerUrlVariable);
        if (url == nullptr) throw ConfigError(kWorkerUrlVariable, "not set");
        RedisOptions o = parse_redis_url(url);
        const int threads = std::stoi(argv[4]);
        o.pool_size = static_cast<std::size_t>(threads) * 2;
        RedisClient redis(o);
        LockClientOptions lo;
        lo.prefix = argv[2];
        RedisLockClient locks(redis, lo);
        RedisMutex m(locks, argv[3]);
        redis.subscriber();  // connect it before the window opens, as the parent does
        const auto start = from_ns(std::stoll(argv[5]));
        const long long late_ms = std::max<long long>(
            0, std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
        CycleCount c = run_cycles(m, threads, start, from_ns(std::stoll(argv[6])));
        if (!c.error.empty()) throw Error(c.error);
        auto s = locks.stats();
        std::cout << "cycles=" << c.cycles << " attempts=" << s.acquire_attempts << " acquired=" << s.acquired
                  << " wakeups=" << s.wakeups << " late_ms=" << late_ms
                  << " cpu_us=" << static_cast<long long>(c.cpu_seconds * 1e6) << " switches=" << c.switches
                  << std::endl;
        return 0;
    } catch (const std::exception& e) {
        std::cout << "error: " << e.what() << std::endl;
        return 1;
    }
}

void register_handover(Environment& env, Plan& plan) {
    const Budget& b = env.budget();
    auto contended = std::make_shared<RedisMutex>(env.locks(), "bench-handover");
    auto solo = std::make_shared<RedisMutex>(env.locks(), "bench-handover-solo");
    env.redis().subscriber();  // the waiters' connection, opened before any window
    const RedisOptions options = env.redis_options();
    const std::string prefix = env.locks().options().prefix;
    RedisLockClient* locks = &env.locks();
    Environment* envp = &env;
    const auto window = b.handover_window;

    benchmark::RegisterBenchmark(
        "handover/contended_16_threads_2_processes",
        [=](benchmark::State& state) {
            for (auto _ : state) {
                try {
                    // Time for the child to start and connect before the window opens.
                    const auto start = Clock::now() + std::chrono::milliseconds(400);
                    const auto end = start + window;
                    const auto before = locks->stats();
                    const auto server0 = server_usage(*envp);
                    const auto child =
                        spawn_handover_worker(options, prefix, contended->name(), kThreadsPerProcess, start, end);
                    CycleCount mine = run_cycles(*contended, kThreadsPerProcess, start, end);
                    const auto server1 = server_usage(*envp);
                    const std::string theirs = finish_handover_worker(*child);
                    if (!mine.error.empty()) {
                        state.SkipWithError(mine.error.c_str());
                        break;
                    }
                    const auto after = locks->stats();
                    const double seconds = std::chrono::duration<double>(window).count();
                    const double cycles = static_cast<double>(mine.cycles + field(theirs, "cycles"));
                    const double acquired =
                        static_cast<double>(after.acquired - before.acquired + field(theirs, "acquired"));
                    const double attempts = static_cast<double>(
                        after.acquire_attempts - before.acquire_attempts + field(theirs, "attempts"));
                    const double wakeups =
                        static_cast<double>(after.wakeups - before.wakeups + field(theirs, "wakeups"));
                    state.SetIterationTime(seconds);
                    state.counters["cycles_per_s"] = cycles / seconds;
                    state.counters["attempts_per_acquisition"] = acquired > 0 ? attempts / acquired : 0;
                    state.counters["wakeups_per_acquisition"] = acquired > 0 ? wakeups / acquired : 0;
                    state.counters["child_late_ms"] = static_cast<double>(field(theirs, "late_ms"));
                    state.counters["share_of_child"] =
                        cycles > 0 ? static_cast<double>(field(theirs, "cycles")) / cycles : 0;
                    set_cost_counters(state, cycles,
                                      mine.cpu_seconds + static_cast<double>(field(theirs, "cpu_us")) / 1e6,
                                      server0, server1, seconds);
                    // Both processes, all their threads (waiters, subscriber, watchdog, pool).
                    if (cycles > 0)
                        state.counters["switches_per_cycle"] =
                            static_cast<double>(mine.switches + field(theirs, "switches")) / cycles;
                } catch (const std::exception& e) {
                    state.SkipWithError(e.what());
                    break;
                }
            }
        })
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->Repetitions(b.throughput_repetitions);

    benchmark::RegisterBenchmark(
        "handover/uncontended_1_thread",
        [=](benchmark::State& state) {
            for (auto _ : state) {
                try {
                    const auto start = Clock::now() + std::chrono::milliseconds(10);
                    const auto end = start + window;
                    const auto server0 = server_usage(*envp);
                    CycleCount c = run_cycles(*solo, 1, start, end);
                    const auto server1 = server_usage(*envp);
                    if (!c.error.empty()) {
                        state.SkipWithError(c.error.c_str());
                        break;
                    }
                    const double seconds = std::chrono::duration<double>(window).count();
                    state.SetIterationTime(seconds);
                    state.counters["cycles_per_s"] = static_cast<double>(c.cycles) / seconds;
                    set_cost_counters(state, static_cast<double>(c.cycles), c.cpu_seconds, server0, server1,
                                      seconds);
                    if (c.cycles > 0)
                        state.counters["switches_per_cycle"] =
                            static_cast<double>(c.switches) / static_cast<double>(c.cycles);
                } catch (const std::exception& e) {
                    state.SkipWithError(e.what());
                    break;
                }
            }
        })
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->Repetitions(b.throughput_repetitions);

    plan.add(
        row_order::kHandover, "contended hand-over (16 threads, 2 processes)", "≥ 0.8×",
        {"handover/contended_16_threads_2_processes", "handover/uncontended_1_thread"}, [](const Results& r) {
            TableRow row = rate_row(r, "handover/contended_16_threads_2_processes",
                                    "handover/uncontended_1_thread", "cycles_per_s", 0.8, "cycles");
            const double attempts =
                r.counter("handover/contended_16_threads_2_processes", "attempts_per_acquisition");
            const double wakeups =
                r.counter("handover/contended_16_threads_2_processes", "wakeups_per_acquisition");
            const double child = r.counter("handover/contended_16_threads_2_processes", "share_of_child");
            const std::string c = "handover/contended_16_threads_2_processes";
            const std::string u = "handover/uncontended_1_thread";
            const double client_cpu = r.counter(c, "client_cpu_us_per_cycle");
            const double redis_cpu = r.counter(c, "redis_cpu_us_per_cycle");
            const double solo_client_cpu = r.counter(u, "client_cpu_us_per_cycle");
            const double solo_redis_cpu = r.counter(u, "redis_cpu_us_per_cycle");
            const double scripts = r.counter(c, "scripts_per_cycle");
            const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
            row.notes = "empty critical section; per acquisition " + fixed(attempts, 2) +
                        " acquire scripts, " + fixed(wakeups, 2) + " wake-ups; per cycle " +
                        fixed(scripts, 1) + " scripts (alone " + fixed(r.counter(u, "scripts_per_cycle"), 1) +
                        "), client CPU " + fixed(client_cpu, 0) + " µs (alone " + fixed(solo_client_cpu, 0) +
                        "), Redis CPU " + fixed(redis_cpu, 0) + " µs (alone " + fixed(solo_redis_cpu, 0) +
                        "), context switches " + fixed(r.counter(c, "switches_per_cycle"), 1) + " (alone " +
                        fixed(r.counter(u, "switches_per_cycle"), 1) + "); the second process made " + fixed(child * 100, 0) +
                        "% of the cycles; repetitions " + spread(r, c, "cycles_per_s") + " vs " +
                        spread(r, u, "cycles_per_s") + " cycles/s";
            row.notes += "; cores busy while contended: the lock's processes + Redis " +
                         fixed(r.counter(c, "ours_cores"), 2) + ", other processes " +
                         fixed(r.counter(c, "others_cores"), 2) + " of " + std::to_string(cores);
            if (row.verdict == Verdict::Missed) {
                row.notes +=
                    "; missed: a cycle under contention costs " + fixed(client_cpu + redis_cpu, 0) +
                    " µs of CPU (alone " + fixed(solo_client_cpu + solo_redis_cpu, 0) + "), so " +
                    std::to_string(cores) + " cores cap it near " +
                    per_second(cores * 1e6 / (client_cpu + redis_cpu), "cycles") +
                    " before anything else runs; threads of one process queue at the local gate, and the one "
                    "that waits in Redis for the other process runs 2 acquire scripts (a try that queues "
                    "it, a try after its wake-up) and is woken through the subscriber thread";
            }
            row.data["client_cpu_us_per_cycle"] = client_cpu;
            row.data["redis_cpu_us_per_cycle"] = redis_cpu;
            row.data["alone_client_cpu_us_per_cycle"] = solo_client_cpu;
            row.data["alone_redis_cpu_us_per_cycle"] = solo_redis_cpu;
            row.data["attempts_per_acquisition"] = attempts;
            row.data["wakeups_per_acquisition"] = wakeups;
            row.data["share_of_child"] = child;
            row.data["switches_per_cycle"] = r.counter(c, "switches_per_cycle");
            row.data["alone_switches_per_cycle"] = r.counter(u, "switches_per_cycle");
            return row;
        });
}

}  // namespace lockstep::bench
