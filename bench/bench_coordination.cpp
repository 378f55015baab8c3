// The coordination layer (coordination/) against the lock cycle it is built on:
//
//   - A job slot: a JobLock's run_once of an empty job, then release(), against lock()+unlock()
//     of a mutex of the same service, call by call in one loop (paired.h). Each call is a fresh
//     JobLock (a node that has not run the slot yet; one JobLock runs a slot once), with the
//     default at_least_for (the slot's end: every(1 h)) and release() right after the job, which
//     ends the hold as at_least_for 0 would (without a run record at_least_for 0 skips every slot
//     as "too late"). Redis and MySQL. Target <= 1.2x.
//   - The run record: a transaction of one UPDATE with JobRunRecord::record first (fence upsert
//     and the slot's row, in that transaction) against the same transaction without it. Each
//     call records a new slot with a greater token, as every real run does. Target <= 1.15x.
//   - A semaphore permit: Semaphore::acquire() + release() against RedisMutex lock()+unlock() on
//     the same Redis (target <= 1.3x); and 16 threads on one 8-permit semaphore, counting the
//     permits in use inside the critical section (above 8 fails the row), against 8 independent
//     mutexes with 2 threads each (throughput shown).
//   - Leader failover: a child process (`lockstep-bench --leader-worker`) leads a LeaderLatch
//     with a 1 s lease; it is SIGKILLed at a random point of its lease and the time until a latch
//     of this process is elected is measured, 20 times; p50 and p99 (the worst of 20) ÷ the
//     lease. Redis, MySQL (a killed MySQL holder's session ends with its socket) and ZooKeeper (a
//     1 s session timeout: the ephemeral lock node goes when the server expires the session).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "families.h"
#include "lockstep/servers/child_process.h"
#include "lockstep/coordination/job_lock.h"
#include "lockstep/coordination/job_run_record.h"
#include "lockstep/coordination/leader_latch.h"
#include "lockstep/coordination/semaphore.h"
#include "lockstep/core/error.h"
#include "lockstep/core/uri.h"
#include "lockstep/db/transaction.h"
#include "lockstep/locks/mysql_lock_service.h"
#include "lockstep/locks/redis_mutex.h"
#include "paired.h"

namespace lockstep::bench {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr const char* kJobRedis = "coordination/job_slot_redis";
constexpr const char* kJobMysql = "coordination/job_slot_mysql";
constexpr const char* kRunRecord = "coordination/run_record";
constexpr const char* kSemCycle = "coordination/semaphore_cycle";
constexpr const char* kSemContended = "coordination/semaphore_16_threads_8_permits";
constexpr const char* kMutexPairs = "coordination/8_mutexes_2_threads_each";
constexpr const char* kFailoverRedis = "coordination/leader_failover_redis";
constexpr const char* kFailoverMysql = "coordination/leader_failover_mysql";
constexpr const char* kFailoverZooKeeper = "coordination/leader_failover_zookeeper";

// The lock service URL reaches a leader worker through this variable (it may hold a password).
constexpr const char* kLeaderUrlVariable = "LOCKSTEP_BENCH_LEADER_URL";
constexpr auto kLeaderLease = 1000ms;
constexpr int kFailovers = 20;
constexpr int kSemThreads = 16;
constexpr int kSemPermits = 8;

// One JobLock cycle of a node that has not run the current slot: run an empty job, release.
void job_cycle(LockService& service, const std::string& job) {
    JobLock lock(service, job, JobSchedule::every(1h));
    const JobRun run = lock.run_once([](JobContext&) {});
    if (run.outcome != JobOutcome::Ran) {
        throw Error("job slot not run: " + std::string(to_string(run.outcome)) + " " + run.skip_reason);
    }
    lock.release();
}

// Redis commands one call of `op` sends, by name ("evalsha 2, time 2"), from INFO commandstats
// around 50 calls (the commands inside scripts are counted too).
std::string commands_per_call(Environment& env, const std::function<void()>& op) {
    constexpr int kCalls = 50;
    const auto before = env.command_stats();
    for (int i = 0; i < kCalls; ++i) op();
    const auto after = env.command_stats();
    std::string out;
    for (const auto& [name, stat] : after) {
        const auto it = before.find(name);
        const long long calls = stat.calls - (it == before.end() ? 0 : it->second.calls);
        // INFO itself and the odd background command are not the operation's.
        if (name == "info" || calls < kCalls / 2) continue;
        char buf[64];
        std::snprintf(buf, sizeof buf, "%s%s %.0f", out.empty() ? "" : ", ", name.c_str(),
                      static_cast<double>(calls) / kCalls);
        out += buf;
    }
    return out;
}

void register_job_slot(Environment& env, Plan& plan, const char* bench, const std::string& backend,
                       std::shared_ptr<LockService> service, int order, bool count_commands) {
    const Budget& b = env.budget();
    auto commands = std::make_shared<std::string>();
    register_paired(bench, b, [&env, service, commands, count_commands] {
        std::shared_ptr<DistributedMutex> m = service->make_mutex("bench-job-floor");
        if (count_commands && commands->empty()) {
            *commands = "per job slot: " + commands_per_call(env, [&] { job_cycle(*service, "bench-job-slot"); }) +
                        "; per mutex cycle: " + commands_per_call(env, [&] {
                            m->lock();
                            m->unlock();
                        });
        }
        return std::vector<TimedOp>{
            {"job", [service] { job_cycle(*service, "bench-job-slot"); }},
            {"mutex",
             [m] {
                 m->lock();
                 m->unlock();
             }},
        };
    });
    plan.add(order, backend + ": job slot ÷ lock cycle", "≤ 1.2×", {bench}, [bench, commands, backend](const Results& r) {
        const MedianRepetition m(r, bench, "job", "mutex");
        TableRow row = paired_latency_row(m, "job", "mutex", 1.2, "run_once+release", "lock+unlock");
        const std::string slot_from =
            backend == "redis"
                ? "the slot from the grant's own TIME, which the acquire script returns with the token "
                  "(Hold::server_time_at_grant): 2 round trips against 2"
                : "the slot from one read of the server clock after the grant (SELECT UTC_TIMESTAMP(6): "
                  "GET_LOCK does not stamp its grant): 3 round trips against 2";
        row.notes = "a fresh JobLock, empty job, release() right after it; " + slot_from + " (+" +
                    micros(m.seconds("job") - m.seconds("mutex")) + " a slot)";
        if (!commands->empty()) row.notes += "; Redis commands " + *commands;
        return row;
    });
}

void register_run_record(Environment& env, Plan& plan) {
    const Budget& b = env.budget();
    JobRunRecord::create_table(env.db());
    const std::int64_t id = env.new_ids(1);
    env.insert_product(id, 1'000'000);
    MysqlPool* pool = &env.db();
    const std::string job = env.prefix() + "bench-run-record";
    register_paired(
        kRunRecord, b,
        [pool, id, job] {
            static std::int64_t slot = 0;  // across repetitions: a new slot every run
            const auto started = std::chrono::system_clock::now();
            return std::vector<TimedOp>{
                {"recorded",
                 [pool, id, job, started] {
                     Transaction tx(*pool);
                     ++slot;
                     JobRunRecord::record(tx, job, slot, slot, "bench", started);
                     tx.execute("UPDATE products SET stock = stock + 1 WHERE id = ?", {id});
                     tx.commit();
                 }},
                {"plain",
                 [pool, id] {
                     Transaction tx(*pool);
                     tx.execute("UPDATE products SET stock = stock + 1 WHERE id = ?", {id});
                     tx.commit();
                 }},
            };
        },
        [pool, job] { pool->execute("DELETE FROM lockstep_job_runs WHERE job = ?", {job}); });
    plan.add(row_order::kCoordination + 2, "job run record ÷ the job's transaction", "≤ 1.15×", {kRunRecord},
             [](const Results& r) {
                 const MedianRepetition m(r, kRunRecord, "recorded", "plain");
                 TableRow row = paired_latency_row(m, "recorded", "plain", 1.15, "record+UPDATE+COMMIT",
                                                   "UPDATE+COMMIT");
                 row.notes = "JobRunRecord::record in the job's transaction: one upsert of the fence row (INSERT ... ON "
                             "DUPLICATE KEY UPDATE, raised to the newer token) and the INSERT of the slot's row: 2 "
                             "statements (round trips) more than BEGIN, UPDATE, COMMIT (+" +
                             micros(m.seconds("recorded") - m.seconds("plain")) + " a run)";
                 return row;
             });
}

void register_semaphore(Environment& env, Plan& plan) {
    const Budget& b = env.budget();
    std::shared_ptr<Semaphore> sem =
        make_semaphore(env.lock_service(), "bench-sem-cycle", SemaphoreOptions{.permits = kSemPermits});
    auto mutex = std::make_shared<RedisMutex>(env.locks(), "bench-sem-floor");
    auto commands = std::make_shared<std::string>();
    register_paired(kSemCycle, b, [&env, sem, mutex, commands] {
        if (commands->empty()) {
            *commands = "per permit: " + commands_per_call(env, [&] { sem->acquire().release(); }) +
                        "; per mutex cycle: " + commands_per_call(env, [&] {
                            mutex->lock();
                            mutex->unlock();
                        });
        }
        return std::vector<TimedOp>{
            {"sem", [sem] { sem->acquire().release(); }},
            {"mutex",
             [mutex] {
                 mutex->lock();
                 mutex->unlock();
             }},
        };
    });
    plan.add(row_order::kCoordination + 3, "redis: semaphore permit ÷ lock cycle", "≤ 1.3×", {kSemCycle},
             [commands](const Results& r) {
                 const MedianRepetition m(r, kSemCycle, "sem", "mutex");
                 TableRow row = paired_latency_row(m, "sem", "mutex", 1.3, "acquire+release", "lock+unlock");
                 row.notes = "an 8-permit Semaphore on the same Redis and client, uncontended (+" +
                             micros(m.seconds("sem") - m.seconds("mutex")) + " a cycle)";
                 if (!commands->empty()) row.notes += "; Redis commands " + *commands;
                 return row;
             });

    // 16 threads on 8 permits; permits in use counted inside the critical section.
    struct Count {
        std::atomic<int> in_use{0};
        std::atomic<int> most{0};
    };
    auto count = std::make_shared<Count>();
    std::shared_ptr<Semaphore> shared =
        make_semaphore(env.lock_service(), "bench-sem-contended", SemaphoreOptions{.permits = kSemPermits});
    benchmark::RegisterBenchmark(kSemContended,
                                 [shared, count](benchmark::State& state) {
                                     double cycles = 0;
                                     bool over = false;
                                     try {
                                         for (auto _ : state) {
                                             SemaphorePermit p = shared->acquire();
                                             const int now = ++count->in_use;
                                             int most = count->most.load();
                                             while (now > most && !count->most.compare_exchange_weak(most, now)) {
                                             }
                                             over = over || now > kSemPermits;
                                             --count->in_use;
                                             p.release();
                                             cycles += 1;
                                         }
                                     } catch (const std::exception& e) {
                                         state.SkipWithError(e.what());
                                     }
                                     if (over && !state.error_occurred()) {
                                         state.SkipWithError("more than 8 permits of an 8-permit semaphore in use at once");
                                     }
                                     state.counters["cycles"] = benchmark::Counter(cycles, benchmark::Counter::kIsRate);
                                     if (state.thread_index() == 0) state.counters["most_in_use"] = count->most.load();
                                 })
        ->Threads(kSemThreads)
        ->UseRealTime()
        ->MinTime(b.throughput_min_time)
        ->Repetitions(b.throughput_repetitions);
    LockService* service = &env.lock_service();
    benchmark::RegisterBenchmark(kMutexPairs,
                                 [service](benchmark::State& state) {
                                     auto m = service->make_mutex("bench-sem-pair-" + std::to_string(state.thread_index() / 2));
                                     double cycles = 0;
                                     try {
                                         for (auto _ : state) {
                                             m->lock();
                                             m->unlock();
                                             cycles += 1;
                                         }
                                     } catch (const std::exception& e) {
                                         state.SkipWithError(e.what());
                                     }
                                     state.counters["cycles"] = benchmark::Counter(cycles, benchmark::Counter::kIsRate);
                                 })
        ->Threads(kSemThreads)
        ->UseRealTime()
        ->MinTime(b.throughput_min_time)
        ->Repetitions(b.throughput_repetitions);
    plan.add(row_order::kCoordination + 4, "redis: 16 threads on 8 permits ÷ 8 mutexes × 2 threads", "shown",
             {kSemContended, kMutexPairs}, [](const Results& r) {
                 TableRow row = rate_row(r, kSemContended, kMutexPairs, "cycles", 0, "cycles");
                 const double most = r.counter_max(kSemContended, "most_in_use");
                 row.notes = "most permits in use at once " + fixed(most, 0) +
                             " (never above 8: a violation fails the row); a release wakes every waiter (one "
                             "message), a freed mutex its own waiter; semaphore range " +
                             spread(r, kSemContended, "cycles") + ", mutexes " + spread(r, kMutexPairs, "cycles");
                 row.data["most_in_use"] = most;
                 return row;
             });
}

// Starts `lockstep-bench --leader-worker PREFIX NAME LEASE_MS` with its stdout on a pipe.
std::unique_ptr<testing::ChildProcess> spawn_leader_worker(const std::string& url, const std::string& prefix,
                                                           const std::string& name) {
    return std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{"lockstep-bench", "--leader-worker", prefix, name,
                                 std::to_string(kLeaderLease.count())},
        std::map<std::string, std::string>{{kLeaderUrlVariable, url}});
}

double percentile(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
    return v[std::min(i, v.size() - 1)];
}

void register_failover(Environment& env, Plan& plan, const char* bench, const std::string& backend, std::string url,
                       std::shared_ptr<LockService> service, int order, const std::string& note) {
    const std::string prefix = env.prefix();
    benchmark::RegisterBenchmark(bench,
                                 [service, url, prefix](benchmark::State& state) {
                                     std::vector<double> failovers;
                                     std::mt19937 rng(std::random_device{}());
                                     std::uniform_int_distribution<int> phase(0, static_cast<int>(kLeaderLease.count()));
                                     const std::string name = "bench-leader";
                                     try {
                                         for (auto _ : state) {
                                             for (int i = 0; i < kFailovers; ++i) {
                                                 const auto w = spawn_leader_worker(url, prefix, name);
                                                 // The worker's first line: "elected", or why not.
                                                 const auto line = w->read_line(60s);
                                                 if (line != "elected") {
                                                     throw Error("leader worker: " + line.value_or("exited or silent"));
                                                 }
                                                 LeaderLatchOptions lo;
                                                 lo.lock.lease = kLeaderLease;
                                                 LeaderLatch standby(*service, name, lo);
                                                 standby.start();
                                                 // The kill lands anywhere in the leader's renewal cycle.
                                                 std::this_thread::sleep_for(std::chrono::milliseconds(phase(rng)));
                                                 if (standby.is_leader()) {
                                                     throw Error("the standby was elected while the worker led");
                                                 }
                                                 const auto killed = Clock::now();
                                                 w->signal(SIGKILL);
                                                 const bool elected = standby.await_leadership(killed + 30 * kLeaderLease);
                                                 const auto took = Clock::now() - killed;
                                                 w->wait();
                                                 if (!elected) throw Error("no standby elected within 30 leases");
                                                 failovers.push_back(std::chrono::duration<double>(took).count());
                                                 standby.close();
                                             }
                                         }
                                     } catch (const std::exception& e) {
                                         state.SkipWithError(e.what());
                                         return;
                                     }
                                     state.counters["p50_s"] = percentile(failovers, 0.5);
                                     state.counters["p99_s"] = percentile(failovers, 0.99);
                                     state.counters["min_s"] = percentile(failovers, 0);
                                 })
        ->Iterations(1)
        ->Repetitions(1)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    plan.add(order, backend + ": leader failover ÷ lease", "shown", {bench}, [bench, note](const Results& r) {
        const double p50 = r.counter(bench, "p50_s"), p99 = r.counter(bench, "p99_s"), low = r.counter(bench, "min_s");
        const double lease = std::chrono::duration<double>(kLeaderLease).count();
        TableRow row;
        row.ours = fixed(p50 * 1e3, 0) + " ms p50, " + fixed(p99 * 1e3, 0) + " ms p99";
        row.baseline = fixed(lease * 1e3, 0) + " ms lease";
        row.ratio = times(p50 / lease) + " / " + times(p99 / lease);
        row.target = "shown";
        row.verdict = Verdict::Shown;
        row.notes = std::to_string(kFailovers) + " SIGKILLs of a leading child process at a random point of its "
                    "lease, time to a standby's election (fastest " + fixed(low * 1e3, 0) + " ms); " + note;
        row.data = {{"p50_seconds", p50}, {"p99_seconds", p99}, {"min_seconds", low}, {"lease_seconds", lease}};
        return row;
    });
}

}  // namespace

int leader_worker_main(int argc, char** argv) {
    // lockstep-bench --leader-worker PREFIX NAME LEASE_MS
    if (argc != 5) {
        std::cerr << "usage: lockstep-bench --leader-worker PREFIX NAME LEASE_MS\n";
        return 2;
    }
    const char* url = std::getenv(kLeaderUrlVariable);
    if (url == nullptr) {
        std::cerr << "leader worker: " << kLeaderUrlVariable << " is not set\n";
        return 2;
    }
    try {
        LockServiceOptions so;
        so.prefix = argv[2];
        auto service = open_lock_service(url, so);
        LeaderLatchOptions lo;
        lo.lock.lease = std::chrono::milliseconds(std::atol(argv[4]));
        LeaderLatch latch(*service, argv[3], lo);
        latch.start();
        if (!latch.await_leadership(30s)) {
            std::cout << "not elected in 30 s" << std::endl;
            return 1;
        }
        std::cout << "elected" << std::endl;
        for (;;) ::pause();  // until SIGKILL
    } catch (const std::exception& e) {
        std::cout << e.what() << std::endl;
        return 1;
    }
}

void register_coordination(Environment& env, Plan& plan) {
    LockServiceOptions so;
    so.prefix = env.prefix();
    auto redis = std::shared_ptr<LockService>(std::shared_ptr<LockService>{}, &env.lock_service());
    auto mysql = std::make_shared<MysqlLockService>(env.mysql_options(), so);

    register_job_slot(env, plan, kJobRedis, "redis", redis, row_order::kCoordination, true);
    register_job_slot(env, plan, kJobMysql, "mysql", mysql, row_order::kCoordination + 1, false);
    register_run_record(env, plan);
    register_semaphore(env, plan);
    register_failover(env, plan, kFailoverRedis, "redis", to_url(env.redis_options()), redis,
                      row_order::kCoordination + 5,
                      "the standby waits out the dead leader's key: at most the lease after its last renewal "
                      "(every lease/3)");
    register_failover(env, plan, kFailoverMysql, "mysql", to_url(env.mysql_options()), mysql,
                      row_order::kCoordination + 6,
                      "GET_LOCK belongs to the dead process's session, which the server ends when its socket "
                      "closes: the lease plays no part");
#ifdef LOCKSTEP_HAVE_ZOOKEEPER
    // The session timeout is ZooKeeper's lease: the same 1 s, so that the row compares with redis's.
    const std::string zk_url = "zookeeper://" + shared_zookeeper().hosts() +
                               "?session_timeout_ms=" + std::to_string(kLeaderLease.count());
    auto zookeeper = std::shared_ptr<LockService>(open_lock_service(zk_url, so));
    register_failover(env, plan, kFailoverZooKeeper, "zookeeper", zk_url, zookeeper, row_order::kCoordination + 7,
                      "the dead leader's lock node is ephemeral: it goes when the server expires the killed "
                      "process's session, one session timeout (1 s, the lease here) after its last heartbeat, "
                      "checked every tick (200 ms); the standby's watch on it then fires");
#else
    plan.add_not_built(row_order::kCoordination + 7, "zookeeper: leader failover ÷ lease", "shown",
                       "libzookeeper-mt not installed (scripts/install-deps)");
#endif
}

}  // namespace lockstep::bench
