// The binlog follower through a primary failover (docs/invalidation.md, "A primary failover"),
// one row, shown and not judged: per repetition a private MariaDB primary and a GTID replica
// (log_slave_updates, read-only until promoted) are started, the follower is given the replica
// as its failover source and catches up with writes on the primary, every one of which reached
// the replica. Then the primary is SIGKILLed and the replica promoted (STOP SLAVE, RESET SLAVE
// ALL, read_only = 0), and one write goes to the new primary with its key cached first.
//
// Measured per failover: the follower's own gap (InvalidatorMetrics::failover_gap_ms: the last
// event received from the old primary -> the first from the new one), the first write on the new
// primary -> its key deleted, and the keys the follower flushed (0 when the new primary has the
// follower's position, as here: every write reached the replica before the kill). The gap is
// bounded by how the follower notices and leaves a dead source: its read timeout, heartbeat and
// reconnect backoff, listed in the row's note. Each repetition starts its own servers (a
// failover ends replication), so they are few: the row shows their median.
//
// Redis is the run's; the follower's map uses a prefix of its own, so no other family's keys are
// deleted by it.
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "families.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/db/pooled_mysql_connection.h"
#include "lockstep/invalidation/binlog_invalidator.h"
#include "lockstep/servers/demo_schema.h"
#include "lockstep/servers/local_servers.h"

namespace lockstep::bench {

namespace {

constexpr const char* kFailover = "follower/failover";
constexpr int kRows = 21;  // 20 writes on the old primary, one on the new
using Clock = std::chrono::steady_clock;

// The follower's settings that bound the gap (shown in the note).
constexpr auto kHeartbeat = std::chrono::milliseconds(100);
constexpr auto kReadTimeout = std::chrono::milliseconds(1000);
constexpr auto kRetryMin = std::chrono::milliseconds(20);
constexpr auto kRetryMax = std::chrono::milliseconds(200);
constexpr auto kSourceCheck = std::chrono::milliseconds(1000);

void run_on(MysqlPool& pool, const std::string& sql) { pool.acquire()->execute_unprepared(sql); }

std::string millis(double ms) { return fixed(ms, 1) + " ms"; }

double ms_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

// One failover on servers of its own; false (with the reason set on `state`) if it failed.
bool one_failover(benchmark::State& state, RedisClient& redis, const std::string& prefix, std::uint32_t server_id) {
    LocalServersOptions so;
    so.redis = false;
    so.use_environment = false;
    so.mysql_replica = true;
    LocalServers servers(so);
    auto primary = std::make_unique<MysqlPool>(servers.mysql_options());
    lockstep::testing::bootstrap_demo_schema(*primary);
    MysqlPool replica(servers.mysql_replica_options());
    for (int id = 1; id <= kRows; ++id) {
        primary->execute("INSERT INTO products (id, name, price, stock, version) VALUES (?, 'p', 1, 1, 1)",
                         {std::int64_t{id}});
    }
    servers.wait_for_replica();
    run_on(replica, "SET GLOBAL read_only = 1");  // a replica until promoted

    const InvalidationMap map({{.table = "products", .entity = "product", .prefix = prefix}});
    auto key = [&](int id) { return map.key(map.bindings()[0], id); };
    // Its key cached first, so only the follower's DEL removes it.
    auto write = [&](MysqlPool& pool, int id) {
        redis.set(key(id), "cached-before-the-write", std::chrono::seconds(60));
        pool.execute("UPDATE products SET price = price + 1, version = version + 1 WHERE id = ?", {std::int64_t{id}});
    };

    BinlogInvalidatorOptions fo;
    fo.name = "bench-failover-" + prefix;
    fo.server_id = server_id;
    fo.heartbeat = kHeartbeat;
    fo.read_timeout = kReadTimeout;
    fo.retry_min = kRetryMin;
    fo.retry_max = kRetryMax;
    fo.source_check = kSourceCheck;
    fo.flush_on_fresh_start = false;
    fo.failover_sources = {servers.mysql_replica_options()};
    BinlogInvalidator follower(servers.mysql_options(), redis, map, fo);
    follower.start();
    if (!follower.wait_caught_up(std::chrono::seconds(20))) {
        state.SkipWithError("the follower did not catch up with the primary");
        return false;
    }
    for (int id = 1; id < kRows; ++id) write(*primary, id);
    servers.wait_for_replica();  // every write reached the replica before the primary dies
    if (!follower.wait_caught_up(std::chrono::seconds(20))) {
        state.SkipWithError("the follower did not apply the primary's writes");
        return false;
    }

    servers.kill_mysql();
    const auto killed = Clock::now();
    primary.reset();
    run_on(replica, "STOP SLAVE");
    run_on(replica, "RESET SLAVE ALL");
    run_on(replica, "SET GLOBAL read_only = 0");
    const auto first_write = Clock::now();
    write(replica, kRows);
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (redis.command({"EXISTS", key(kRows)}).integer() != 0) {
        if (Clock::now() > deadline) {
            state.SkipWithError("the follower never deleted the new primary's first write");
            return false;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    const auto gone = Clock::now();
    while (follower.metrics().source_switches == 0) {
        if (Clock::now() > deadline) {
            state.SkipWithError("the follower did not count its switch");
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const InvalidatorMetrics m = follower.metrics();
    follower.stop();
    for (int id = 1; id <= kRows; ++id) redis.command({"DEL", key(id)});

    state.counters["gap_ms"] = m.failover_gap_ms;
    state.counters["flushed_keys"] = static_cast<double>(m.flushed_keys);
    state.counters["positions_lost"] = static_cast<double>(m.positions_lost);
    state.counters["promote_ms"] = ms_between(killed, first_write);
    state.counters["first_write_gone_ms"] = ms_between(first_write, gone);
    state.counters["kill_to_gone_ms"] = ms_between(killed, gone);
    return true;
}

}  // namespace

void register_follower_failover(Environment& env, Plan& plan) {
    const std::string prefix = env.prefix() + "flo";
    Environment* e = &env;
    const std::uint32_t server_id = 7000 + static_cast<std::uint32_t>(::getpid() % 1000) * 4 + 2;

    benchmark::RegisterBenchmark(kFailover,
                                 [=](benchmark::State& state) {
                                     for (auto _ : state) {
                                         if (!one_failover(state, e->redis(), prefix, server_id)) return;
                                     }
                                 })
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1)
        ->Repetitions(3);

    plan.add(row_order::kFollowerFailover, "follower through a primary failover", "shown", {kFailover},
             [](const Results& r) {
                 const double gap = r.counter(kFailover, "gap_ms");
                 const double gone = r.counter(kFailover, "first_write_gone_ms");
                 TableRow row;
                 row.ours = millis(gap) + " gap, old primary's last event -> new primary's first";
                 row.baseline = millis(gone) + " first write on the new primary -> its key deleted";
                 row.ratio = "—";
                 row.verdict = Verdict::Shown;
                 row.notes = "medians of " + fixed(r.repetitions(kFailover), 0) +
                             " failovers (SIGKILL of the primary, replica promoted " +
                             millis(r.counter(kFailover, "promote_ms")) + " later); gap " +
                             spread(r, kFailover, "gap_ms") + " ms; keys flushed " +
                             fixed(r.counter_max(kFailover, "flushed_keys"), 0) +
                             " (the replica had every write); follower heartbeat 100 ms, read_timeout 1 s, "
                             "reconnect backoff 20-200 ms, source_check 1 s";
                 row.data = {{"gap_median_seconds", gap / 1e3},
                             {"gap_max_seconds", r.counter_max(kFailover, "gap_ms") / 1e3},
                             {"first_write_gone_median_seconds", gone / 1e3},
                             {"kill_to_gone_median_seconds", r.counter(kFailover, "kill_to_gone_ms") / 1e3},
                             {"flushed_keys_max", r.counter_max(kFailover, "flushed_keys")},
                             {"positions_lost_max", r.counter_max(kFailover, "positions_lost")}};
                 return row;
             });
}

}  // namespace lockstep::bench
