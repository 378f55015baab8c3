// The lock backends side by side:
//
//   - Uncontended lock cycle of MySQL and ZooKeeper against each one's own raw floor, call by
//     call in one loop (paired.h): MySQL's lock()+unlock() against a bare GET_LOCK + RELEASE_LOCK
//     on one Connector/C++ connection (through MysqlConnection: prepared, cached statements, one
//     round trip each); ZooKeeper's against a bare create EPHEMERAL_SEQUENTIAL + delete through
//     libzookeeper-mt. Target <= 1.15x. (Redis's own row is "uncontended lock cycle".)
//   - The MySQL fencing designs not chosen (docs/locks.md, "MySQL"), in a loop of their own
//     against the same raw floor (in the cycle's loop their I/O disturbed it): a counter row
//     incremented after GET_LOCK in InnoDB (the previous design; a stored function could merge
//     it into GET_LOCK's statement, but with the binary log on MariaDB refuses to create one
//     without log_bin_trust_function_creators, error 1418) and in Aria. Shown, no target.
//   - Contended throughput per backend: 16 threads on one lock name, cycles/s in total, divided
//     by one thread's cycles/s on the same service. Target >= 0.8x: a hand-over must not cost
//     much more than a free acquisition.
//
// ZooKeeper runs on a private standalone server started here (LocalZooKeeper, forceSync=no,
// 2-5 s of JVM start), or LOCKSTEP_ZOOKEEPER_URL's ensemble.
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "families.h"
#include "lockstep/db/mysql_connection.h"
#include "lockstep/locks/mysql_lock_service.h"
#include "lockstep/locks/redis_fair_lock_service.h"
#include "lockstep/locks/redis_lock_service.h"
#include "paired.h"
#include "same_cpu.h"
#ifdef LOCKSTEP_HAVE_ZOOKEEPER
#ifndef THREADED
#define THREADED  // the C client's synchronous API
#endif
#include <zookeeper/zookeeper.h>

#include <thread>

#include "lockstep/locks/zookeeper_lock_service.h"
#include "lockstep/servers/local_zookeeper.h"
#endif

namespace lockstep::bench {

namespace {

using namespace std::chrono_literals;

constexpr const char* kMysqlCycle = "lock_backends/mysql_cycle";
constexpr const char* kMysqlDesigns = "lock_backends/mysql_fencing_designs";
constexpr const char* kZkCycle = "lock_backends/zookeeper_cycle";
constexpr int kContenders = 16;

std::string contended_name(const std::string& backend, int threads) {
    return "lock_backends/" + backend + "_contended/threads:" + std::to_string(threads);
}

// Registers `backend`'s contended family: 1 thread and kContenders threads on one name, each
// thread lock()+unlock() in a loop; counter "cycles" is a rate summed over the threads.
void register_contended(Environment& env, Plan& plan, const std::string& backend,
                        std::shared_ptr<LockService> service, int order, bool judged = true) {
    const Budget& b = env.budget();
    const std::string name = "contended-" + backend;  // the service adds the run's prefix
    for (int threads : {1, kContenders}) {
        benchmark::RegisterBenchmark(contended_name(backend, threads).c_str(),
                                     [service, name](benchmark::State& state) {
                                         auto m = service->make_mutex(name);
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
                                         state.counters["cycles"] =
                                             benchmark::Counter(cycles, benchmark::Counter::kIsRate);
                                     })
            ->Threads(threads)
            ->UseRealTime()
            ->MinTime(b.throughput_min_time)
            ->Repetitions(b.throughput_repetitions);
    }
    const std::string one = contended_name(backend, 1), many = contended_name(backend, kContenders);
    plan.add(order, backend + ": 16 threads on one lock ÷ 1 thread", judged ? "≥ 0.8×" : "shown", {one, many},
             [one, many, judged](const Results& r) {
                 TableRow row = rate_row(r, many, one, "cycles", 0.8, "cycles");
                 if (!judged) {
                     row.target = "shown";
                     row.verdict = Verdict::Shown;
                 }
                 row.notes = "lock()+unlock() on one name, one service; 16-thread range " + spread(r, many, "cycles") +
                             ", 1-thread range " + spread(r, one, "cycles");
                 return row;
             });
}

}  // namespace

void register_lock_backends(Environment& env, Plan& plan) {
    const Budget& b = env.budget();
    LockServiceOptions so;
    so.prefix = env.prefix();

    // ---- MySQL ----
    auto mysql = std::make_shared<MysqlLockService>(env.mysql_options(), so);
    {
        const MysqlOptions options = env.mysql_options();
        const int mysql_pid = env.mysql_pid();
        const std::string raw_name = env.prefix() + "raw-cycle";
        benchmark::RegisterBenchmark(kMysqlCycle,
                                     [=](benchmark::State& state) {
                                         auto m = mysql->make_mutex("bench-cycle");
                                         MysqlConnection raw(options);
                                         // The control: the floor again on a second connection,
                                         // opened at the first call as the lock opens its session.
                                         // raw_again / raw is what this measurement cannot tell
                                         // from 1.00x (two identical connections).
                                         std::optional<MysqlConnection> raw_again;
                                         bool busy = false;
                                         const std::vector<TimedOp> ops = {
                                             {"ours",
                                              [&] {
                                                  m->lock();
                                                  m->unlock();
                                              }},
                                             {"raw",
                                              [&] {
                                                  auto got = raw.query_one("SELECT GET_LOCK(?, 0) AS got", {raw_name});
                                                  busy = busy || !got || got->get<std::int64_t>("got") != 1;
                                                  raw.query_one("SELECT RELEASE_LOCK(?) AS released", {raw_name});
                                              }},
                                             {"raw_again",
                                              [&] {
                                                  if (!raw_again) raw_again.emplace(options);
                                                  auto got = raw_again->query_one("SELECT GET_LOCK(?, 0) AS got",
                                                                                  {raw_name + "-again"});
                                                  busy = busy || !got || got->get<std::int64_t>("got") != 1;
                                                  raw_again->query_one("SELECT RELEASE_LOCK(?) AS released",
                                                                       {raw_name + "-again"});
                                              }},
                                         };
                                         try {
                                             const SameCpu placement({mysql_pid});
                                             run_paired(state, ops);
                                             state.counters["pinned_cpu"] = placement.cpu();
                                         } catch (const std::exception& e) {
                                             state.SkipWithError(e.what());
                                         }
                                         if (busy && !state.error_occurred()) state.SkipWithError("the raw lock was busy");
                                     })
            ->Unit(benchmark::kMicrosecond)
            ->MinTime(b.latency_min_time)
            ->Repetitions(b.latency_repetitions);
        plan.add(row_order::kLockBackends, "mysql: uncontended lock cycle", "≤ 1.15×", {kMysqlCycle},
                 [mysql](const Results& r) {
                     const MedianRepetition m(r, kMysqlCycle, "ours", "raw");
                     TableRow row = paired_latency_row(m, "ours", "raw", 1.15, "lock+unlock", "GET_LOCK+RELEASE_LOCK");
                     row.notes = "fenced acquisition in one statement, no row written: "
                                 "CASE GET_LOCK(...) WHEN 1 THEN UUID_SHORT() (2 round trips a cycle, as the floor); "
                                 "an epoch row is written once per server run (docs/locks.md, MySQL); "
                                 "client and server on one CPU for the loop (bench/same_cpu.h); control: the floor on a second connection " +
                                 times(m.seconds("raw_again") / m.seconds("raw")) + " of the floor";
                     row.data["control_ratio"] = m.seconds("raw_again") / m.seconds("raw");
                     return row;
                 });
    }
    {
        const MysqlOptions options = env.mysql_options();
        const std::string raw_name = env.prefix() + "raw-designs";
        benchmark::RegisterBenchmark(kMysqlDesigns,
                                     [=](benchmark::State& state) {
                                         MysqlConnection raw(options);
                                         bool busy = false;
                                         // GET_LOCK, the counter row's increment, RELEASE_LOCK.
                                         const auto cycle = [&](const char* table) {
                                             auto got = raw.query_one("SELECT GET_LOCK(?, 0) AS got", {raw_name});
                                             busy = busy || !got || got->get<std::int64_t>("got") != 1;
                                             if (table) {
                                                 raw.execute(std::string("INSERT INTO ") + table +
                                                                 " (name, token) VALUES (?, LAST_INSERT_ID(1)) "
                                                                 "ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + 1)",
                                                             {raw_name});
                                             }
                                             raw.query_one("SELECT RELEASE_LOCK(?) AS released", {raw_name});
                                         };
                                         try {
                                             for (const char* engine : {"InnoDB", "Aria"}) {
                                                 raw.execute_unprepared(std::string("CREATE TABLE IF NOT EXISTS lockstep_bench_fence_") +
                                                                        engine + " (name VARBINARY(255) NOT NULL PRIMARY KEY, "
                                                                        "token BIGINT NOT NULL) ENGINE=" + engine);
                                             }
                                             run_paired(state, {{"raw", [&] { cycle(nullptr); }},
                                                                {"innodb_row", [&] { cycle("lockstep_bench_fence_InnoDB"); }},
                                                                {"aria_row", [&] { cycle("lockstep_bench_fence_Aria"); }}});
                                         } catch (const std::exception& e) {
                                             state.SkipWithError(e.what());
                                         }
                                         if (busy && !state.error_occurred()) state.SkipWithError("the raw lock was busy");
                                     })
            ->Unit(benchmark::kMicrosecond)
            ->MinTime(b.latency_min_time)
            ->Repetitions(b.latency_repetitions);
        plan.add(row_order::kLockBackends + 2, "mysql: fencing by a counter row (not chosen)", "shown", {kMysqlDesigns},
                 [](const Results& r) {
                     const MedianRepetition m(r, kMysqlDesigns, "innodb_row", "raw");
                     TableRow row;
                     row.benchmark = "mysql: fencing by a counter row (not chosen)";
                     char buf[160];
                     std::snprintf(buf, sizeof buf, "%.1f µs InnoDB, %.1f µs Aria", m.seconds("innodb_row") * 1e6,
                                   m.seconds("aria_row") * 1e6);
                     row.ours = buf;
                     std::snprintf(buf, sizeof buf, "%.1f µs GET_LOCK+RELEASE_LOCK", m.seconds("raw") * 1e6);
                     row.baseline = buf;
                     std::snprintf(buf, sizeof buf, "%.2f× / %.2f×", m.seconds("innodb_row") / m.seconds("raw"),
                                   m.seconds("aria_row") / m.seconds("raw"));
                     row.ratio = buf;
                     row.target = "shown";
                     row.notes = "GET_LOCK, INSERT ... ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + 1), "
                                 "RELEASE_LOCK: the previous design's path (its one-statement stored function cannot "
                                 "be created with the binary log on, error 1418)";
                     return row;
                 });
    }
    register_contended(env, plan, "mysql", mysql, row_order::kLockBackends + 5);

    // ---- Redis, fair Redis: contended only (Redis's cycle is the "uncontended lock cycle" row) ----
    register_contended(env, plan, "redis", std::make_shared<RedisLockService>(env.redis_options(), so),
                       row_order::kLockBackends + 6);
    register_contended(env, plan, "redis-fair", std::make_shared<RedisFairLockService>(env.redis_options(), so),
                       row_order::kLockBackends + 7);
    // The same mutex with LockClientOptions::local_gate off (every thread queues in Redis, the
    // behaviour without the gate): the gate's effect measured in the same run, shown, not judged.
    {
        struct Ungated {
            RedisClient redis;
            RedisLockClient locks;
            RedisLockService service;
            Ungated(const RedisOptions& ro, LockClientOptions lo)
                : redis(ro), locks(redis, std::move(lo)), service(locks) {}
        };
        LockClientOptions lo;
        lo.prefix = so.prefix;
        lo.local_gate = false;
        auto ungated = std::make_shared<Ungated>(env.redis_options(), lo);
        register_contended(env, plan, "redis-ungated", std::shared_ptr<LockService>(ungated, &ungated->service),
                           row_order::kLockBackends + 6, false);
    }

#ifdef LOCKSTEP_HAVE_ZOOKEEPER
    // ---- ZooKeeper ----
    const std::string hosts = shared_zookeeper().hosts();
    ZooKeeperLockOptions zo;
    zo.hosts = hosts;
    auto zk = std::make_shared<ZooKeeperLockService>(zo, so);
    benchmark::RegisterBenchmark(kZkCycle,
                                 [=](benchmark::State& state) {
                                     auto m = zk->make_mutex("bench-cycle");
                                     const auto connect = [&]() -> zhandle_t* {
                                         zhandle_t* h = zookeeper_init(hosts.c_str(), nullptr, 10000, nullptr, nullptr, 0);
                                         for (int i = 0; i < 1000 && h && zoo_state(h) != ZOO_CONNECTED_STATE; ++i) {
                                             std::this_thread::sleep_for(10ms);
                                         }
                                         if (h && zoo_state(h) != ZOO_CONNECTED_STATE) {
                                             zookeeper_close(h);
                                             return nullptr;
                                         }
                                         return h;
                                     };
                                     // The floor, and the control: the floor again on a second
                                     // session (raw_again / raw: what this measurement cannot
                                     // tell from 1.00x).
                                     zhandle_t* zh = connect();
                                     zhandle_t* zh_again = zh ? connect() : nullptr;
                                     // A bare handle set as the lock service sets its own: no host
                                     // lookup at every I/O wake-up (host_resolution_delay -1).
                                     zhandle_t* zh_set = zh_again ? connect() : nullptr;
                                     if (!zh || !zh_again || !zh_set) {
                                         for (zhandle_t* h : {zh, zh_again})
                                             if (h) zookeeper_close(h);
                                         state.SkipWithError("raw ZooKeeper client did not connect");
                                         return;
                                     }
                                     zoo_set_servers_resolution_delay(zh_set, -1);
                                     int bad = ZOK;
                                     const auto raw_cycle = [&bad](zhandle_t* h) {
                                         char buf[256];
                                         int rc = zoo_create(h, "/lockstep/bench-raw-", "", 0, &ZOO_OPEN_ACL_UNSAFE,
                                                             ZOO_EPHEMERAL_SEQUENTIAL, buf, sizeof buf);
                                         if (rc == ZOK) rc = zoo_delete(h, buf, -1);
                                         if (rc != ZOK) bad = rc;
                                     };
                                     // The least the recipe itself needs: the create and the listing
                                     // that tells whether the new node is the lowest, pipelined (one
                                     // round trip, as ours), then the delete.
                                     const auto raw_recipe_cycle = [&bad](zhandle_t* h) {
                                         struct Replies {
                                             std::mutex m;
                                             std::condition_variable cv;
                                             int pending = 2;
                                             int rc = ZOK;
                                             std::string created;
                                             void done(int code) {
                                                 std::lock_guard<std::mutex> g(m);
                                                 if (code != ZOK) rc = code;
                                                 if (--pending == 0) cv.notify_one();
                                             }
                                         } r;
                                         zoo_acreate2(
                                             h, "/lockstep/bench-raw-", "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL,
                                             [](int rc, const char* value, const Stat*, const void* d) {
                                                 auto* q = static_cast<Replies*>(const_cast<void*>(d));
                                                 if (rc == ZOK && value) q->created = value;
                                                 q->done(rc);
                                             },
                                             &r);
                                         zoo_aget_children(
                                             h, "/lockstep", 0,
                                             [](int rc, const String_vector*, const void* d) {
                                                 static_cast<Replies*>(const_cast<void*>(d))->done(rc);
                                             },
                                             &r);
                                         std::unique_lock<std::mutex> g(r.m);
                                         r.cv.wait(g, [&] { return r.pending == 0; });
                                         int rc = r.rc;
                                         if (rc == ZOK) rc = zoo_delete(h, r.created.c_str(), -1);
                                         if (rc != ZOK) bad = rc;
                                     };
                                     const std::vector<TimedOp> ops = {
                                         {"ours",
                                          [&] {
                                              m->lock();
                                              m->unlock();
                                          }},
                                         {"raw", [&] { raw_cycle(zh); }},
                                         {"raw_again", [&] { raw_cycle(zh_again); }},
                                         {"raw_set", [&] { raw_cycle(zh_set); }},
                                         {"raw_recipe", [&] { raw_recipe_cycle(zh_set); }},
                                     };
                                     try {
                                         run_paired(state, ops);
                                     } catch (const std::exception& e) {
                                         state.SkipWithError(e.what());
                                     }
                                     zookeeper_close(zh);
                                     zookeeper_close(zh_again);
                                     zookeeper_close(zh_set);
                                     if (bad != ZOK && !state.error_occurred()) state.SkipWithError(zerror(bad));
                                 })
        ->Unit(benchmark::kMicrosecond)
        ->MinTime(b.latency_min_time)
        ->Repetitions(b.latency_repetitions);
    plan.add(row_order::kLockBackends + 1, "zookeeper: uncontended lock cycle", "≤ 1.15×", {kZkCycle},
             [](const Results& r) {
                 const MedianRepetition m(r, kZkCycle, "ours", "raw");
                 TableRow row = paired_latency_row(m, "ours", "raw", 1.15, "lock+unlock", "create+delete");
                 row.notes = "the recipe's create and its get_children are pipelined (one round trip), then delete; "
                             "forceSync=no; floor: a bare handle with libzookeeper's defaults. The service sets "
                             "host_resolution_delay -1 (no host lookup at every I/O wake-up): the floor on a bare handle "
                             "set so is " + times(m.seconds("raw_set") / m.seconds("raw")) + " of the floor, ours " +
                             times(m.seconds("ours") / m.seconds("raw_set")) + " of it; the recipe's own floor on that "
                             "handle (create and listing pipelined, then delete) " +
                             times(m.seconds("raw_recipe") / m.seconds("raw_set")) + " of it, ours " +
                             times(m.seconds("ours") / m.seconds("raw_recipe")) +
                             " of the recipe's; control: the floor on a second session " +
                             times(m.seconds("raw_again") / m.seconds("raw")) + " of the floor";
                 row.data["set_floor_ratio"] = m.seconds("raw_set") / m.seconds("raw");
                 row.data["ours_over_set_floor"] = m.seconds("ours") / m.seconds("raw_set");
                 row.data["ours_over_recipe_floor"] = m.seconds("ours") / m.seconds("raw_recipe");
                 row.data["control_ratio"] = m.seconds("raw_again") / m.seconds("raw");
                 return row;
             });
    register_contended(env, plan, "zookeeper", zk, row_order::kLockBackends + 8);
#else
    plan.add_not_built(row_order::kLockBackends + 1, "zookeeper: uncontended lock cycle", "≤ 1.15×",
                       "libzookeeper-mt not installed (scripts/install-deps)");
#endif
}

}  // namespace lockstep::bench
