// Uncontended lock cycle: RedisMutex::lock + unlock on a free lock, one thread, against two raw
// EVALSHA round trips of the smallest correct reentrant lock (Redisson's pair of scripts: hash
// owner -> count + PEXPIRE; release: decrement, DEL and PUBLISH at zero) sent with bare hiredis,
// timed call by call in one loop (paired.h). A third operation in the loop runs those same two
// scripts through RedisClient::eval, which splits the difference into "the client layer" and
// "the lock itself"; after the timed loop a probe reads what each costs the server. A fourth
// runs the fair mutex (RedisFairLockService) against the same floor, and so against
// the barging mutex measured in the same loop.
#include <memory>
#include <string>
#include <vector>

#include "families.h"
#include "lockstep/locks/redis_fair_lock_service.h"
#include "lockstep/locks/redis_mutex.h"
#include "paired.h"
#include "raw_redis.h"

namespace lockstep::bench {

namespace {

// The two floors below share their tails: a reentrant owner counts up (and renews its lease),
// anyone else is told the holder's remaining lease; a release counts down and deletes at zero.
constexpr const char* kReenterOrBusy = R"lua(
if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[1], 1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 0
end
return redis.call('pttl', KEYS[1])
)lua";
constexpr const char* kCountDownOrDelete = R"lua(
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return -1 end
if redis.call('hincrby', KEYS[1], ARGV[1], -1) > 0 then return 1 end
redis.call('del', KEYS[1])
)lua";

// Redisson's reentrant lock, the least a correct Redis lock does in its two round trips.
// KEYS: lock (acquire); lock, channel (release). ARGV: owner, lease ms.
std::string minimal_acquire() {
    return std::string(R"lua(
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hincrby', KEYS[1], ARGV[1], 1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 0
end
)lua") + kReenterOrBusy;
}
std::string minimal_release() {
    return std::string(kCountDownOrDelete) + R"lua(
redis.call('spublish', KEYS[2], '0')
return 2
)lua";
}

// The fair mutex's own floor: the least a correct FIFO lock does in its two round trips, in the
// manner of Redisson's RFairLock (hash owner -> count with a lease; a list of waiters in arrival
// order with a zset of their deadlines; a waiter whose deadline passed is dropped from the head;
// a free lock goes only to the head or, with nobody waiting, to anyone; the release tells the
// head). No fencing token, like the barging floor above. Uncontended: 4 calls each way.
// KEYS: lock, queue, deadlines (acquire); lock, queue, channel prefix (release). ARGV: owner, lease ms.
std::string minimal_fair_acquire() {
    return std::string(R"lua(
local head = redis.call('lindex', KEYS[2], 0)
while head do
  local t = redis.call('time')
  local deadline = tonumber(redis.call('zscore', KEYS[3], head))
  if deadline and deadline > t[1] * 1000 + math.floor(t[2] / 1000) then break end
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], head)
  head = redis.call('lindex', KEYS[2], 0)
end
if redis.call('exists', KEYS[1]) == 0 and (not head or head == ARGV[1]) then
  if head then
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], ARGV[1])
  end
  redis.call('hset', KEYS[1], ARGV[1], 1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 0
end
)lua") + kReenterOrBusy;
}
std::string minimal_fair_release() {
    return std::string(kCountDownOrDelete) + R"lua(
local head = redis.call('lindex', KEYS[2], 0)
if head then redis.call('spublish', KEYS[3] .. head, '0') end
return 2
)lua";
}

constexpr const char* kCycleBench = "lock_cycle/paired";

}  // namespace

void register_lock_cycle(Environment& env, Plan& plan) {
    const Budget& b = env.budget();
    auto mutex = std::make_shared<RedisMutex>(env.locks(), "bench-cycle");
    const std::string raw_lock = env.prefix() + "{bench-raw-cycle}:lock";
    const std::string raw_channel = env.prefix() + "{bench-raw-cycle}:lock:ch";
    // The lock key's own server (its slot's master on a cluster): each raw EVALSHA is one plain
    // round trip. The SCRIPT LOADs below reach every master of a cluster.
    const RedisOptions options = raw_options_for_key(env.redis(), raw_lock);
    auto acquire = std::make_shared<RedisScript>(minimal_acquire());
    auto release = std::make_shared<RedisScript>(minimal_release());
    auto fair_acquire = std::make_shared<RedisScript>(minimal_fair_acquire());
    auto fair_release = std::make_shared<RedisScript>(minimal_fair_release());
    // Load the scripts now, so the first timed call is already an EVALSHA hit.
    for (const auto& script : {acquire, release, fair_acquire, fair_release}) {
        env.redis().command({"SCRIPT", "LOAD", script->source()});
    }
    const std::string raw_fair_stem = env.prefix() + "{bench-raw-cycle}:fair";
    RedisClient* client = &env.redis();
    Environment* env_ptr = &env;
    LockServiceOptions fair_options;
    fair_options.prefix = env.prefix();
    auto fair_service = std::make_shared<RedisFairLockService>(env.redis_options(), fair_options);  // kept alive by the benchmark below
    std::shared_ptr<DistributedMutex> fair = fair_service->make_mutex("bench-cycle-fair");

    benchmark::RegisterBenchmark(
        kCycleBench,
        [=, env = env_ptr](benchmark::State& state) {
            RawRedis raw(options);
            const std::string raw_owner = "raw:1";
            const std::string client_owner = "client:1";
            const std::string client_lock = raw_lock + ":client";
            bool busy = false;
            const std::vector<TimedOp> ops = {
                {"ours",
                 [&] {
                     mutex->lock();
                     mutex->unlock();
                 }},
                {"raw",
                 [&] {
                     busy =
                         busy || raw.command({"EVALSHA", acquire->sha1(), "1", raw_lock, raw_owner, "30000"})
                                         ->integer != 0;
                     raw.command({"EVALSHA", release->sha1(), "2", raw_lock, raw_channel, raw_owner});
                 }},
                {"fair",
                 [&, keep = fair_service] {
                     fair->lock();
                     fair->unlock();
                 }},
                {"raw_fair",
                 [&] {
                     busy = busy || raw.command({"EVALSHA", fair_acquire->sha1(), "3", raw_fair_stem,
                                                 raw_fair_stem + ":q", raw_fair_stem + ":qx", raw_owner, "30000"})
                                            ->integer != 0;
                     raw.command({"EVALSHA", fair_release->sha1(), "3", raw_fair_stem, raw_fair_stem + ":q",
                                  raw_fair_stem + ":ch:", raw_owner});
                 }},
                {"client",
                 [&] {
                     busy = busy ||
                            client->eval(*acquire, {client_lock}, {client_owner, "30000"}).integer() != 0;
                     client->eval(*release, {client_lock, raw_channel}, {client_owner});
                 }},
            };
            run_paired(state, ops);
            if (busy && !state.error_occurred()) state.SkipWithError("a baseline lock was found busy");
            if (state.error_occurred()) return;
            try {
                // Not timed: what a cycle costs the server (EVALSHA calls and time from INFO commandstats,
                // lock and unlock apart) and how often it puts a thread of this process to sleep or
                // wakes one (context switches of all threads: each round trip is at least one).
                constexpr int kProbe = 100;
                double lock_us = 0, unlock_us = 0, scripts = 0;
                for (int i = 0; i < kProbe; ++i) {
                    const auto s0 = env->command_stats()["evalsha"];
                    mutex->lock();
                    const auto s1 = env->command_stats()["evalsha"];
                    mutex->unlock();
                    const auto s2 = env->command_stats()["evalsha"];
                    lock_us += static_cast<double>(s1.usec - s0.usec);
                    unlock_us += static_cast<double>(s2.usec - s1.usec);
                    scripts += static_cast<double>(s2.calls - s0.calls);
                }
                state.counters["ours_server_lock_us"] = lock_us / kProbe;
                state.counters["ours_server_unlock_us"] = unlock_us / kProbe;
                state.counters["ours_server_scripts"] = scripts / kProbe;
                {
                    const auto f0 = env->command_stats()["evalsha"];
                    for (int i = 0; i < kProbe; ++i) ops[2].call();  // fair
                    const auto f1 = env->command_stats()["evalsha"];
                    state.counters["fair_server_us"] = static_cast<double>(f1.usec - f0.usec) / kProbe;
                    state.counters["fair_server_scripts"] = static_cast<double>(f1.calls - f0.calls) / kProbe;
                    const long long before = process_context_switches();
                    for (int i = 0; i < kProbe; ++i) ops[2].call();
                    state.counters["fair_switches"] =
                        static_cast<double>(process_context_switches() - before) / kProbe;
                }
                const auto r0 = env->command_stats()["evalsha"];
                for (int i = 0; i < kProbe; ++i) ops[1].call();  // raw
                const auto r1 = env->command_stats()["evalsha"];
                state.counters["raw_server_us"] = static_cast<double>(r1.usec - r0.usec) / kProbe;
                state.counters["raw_server_scripts"] = static_cast<double>(r1.calls - r0.calls) / kProbe;
                long long switches = process_context_switches();
                for (int i = 0; i < kProbe; ++i) ops[0].call();
                state.counters["ours_switches"] =
                    static_cast<double>(process_context_switches() - switches) / kProbe;
                switches = process_context_switches();
                for (int i = 0; i < kProbe; ++i) ops[1].call();
                state.counters["raw_switches"] =
                    static_cast<double>(process_context_switches() - switches) / kProbe;
            } catch (const std::exception& e) {
                state.SkipWithError(e.what());
            }
        })
        ->Unit(benchmark::kMicrosecond)
        ->MinTime(b.latency_min_time)
        ->Repetitions(b.latency_repetitions);

    plan.add(row_order::kLockCycle, "uncontended lock cycle", "≤ 1.15×", {kCycleBench}, [](const Results& r) {
        const MedianRepetition m(r, kCycleBench, "ours", "raw");
        TableRow row = paired_latency_row(m, "ours", "raw", 1.15, "lock+unlock", "2 raw EVALSHA");
        const double ours = m.seconds("ours");
        const double raw = m.seconds("raw");
        const double client = m.seconds("client");
        const double lock_server = m.counter("ours_server_lock_us");
        const double unlock_server = m.counter("ours_server_unlock_us");
        const double raw_server = m.counter("raw_server_us");
        const double ours_switches = m.counter("ours_switches");
        const double raw_switches = m.counter("raw_switches");
        const double server_extra = (lock_server + unlock_server - raw_server) / 1e6;
        const double layer = client - raw;
        row.notes = "baseline: Redisson's minimal reentrant scripts over bare hiredis; the +" +
                    micros(ours - raw) + " ≈ Redis running our scripts +" + micros(server_extra) +
                    " (acquire " + fixed(lock_server, 1) + " µs, release " + fixed(unlock_server, 1) +
                    " µs, baseline both " + fixed(raw_server, 1) +
                    " µs; INFO commandstats) + RedisClient::eval layer " + micros(layer) +
                    " + the rest of the client " + micros(ours - raw - server_extra - layer) +
                    "; context switches per cycle " + fixed(ours_switches, 1) + " (baseline " +
                    fixed(raw_switches, 1) + ")";
        if (row.verdict == Verdict::Missed) {
            row.notes += "; missed: 1.15× leaves " + micros(raw * 0.15) +
                         ", the scripts' extra server time alone is " + micros(server_extra);
        }
        row.data["ours_server_lock_us"] = lock_server;
        row.data["ours_server_unlock_us"] = unlock_server;
        row.data["baseline_server_us"] = raw_server;
        row.data["ours_context_switches"] = ours_switches;
        row.data["baseline_context_switches"] = raw_switches;
        row.data["client_eval_seconds"] = client;

        return row;
    });
    plan.add(row_order::kFairCycle, "redis-fair: uncontended lock cycle", "≤ 1.15×", {kCycleBench},
             [](const Results& r) {
                 const MedianRepetition m(r, kCycleBench, "fair", "raw_fair");
                 TableRow row =
                     paired_latency_row(m, "fair", "raw_fair", 1.15, "lock+unlock", "2 raw EVALSHA, minimal FIFO lock");
                 const double fair_server = m.counter("fair_server_us");
                 const double raw_server = m.counter("raw_server_us");
                 const double extra = m.seconds("fair") - m.seconds("raw");
                 row.notes = "the fair mutex (RedisFairLockService: the line, grant on release) against its own floor: "
                             "the least a FIFO lock does (RFairLock's shape: owner hash, waiter list and deadlines, "
                             "head-only hand-off; no fencing), bare hiredis, same loop; against the barging row's "
                             "floor " + times(m.seconds("fair") / m.seconds("raw")) + " (that floor's FIFO twin is " +
                             times(m.seconds("raw_fair") / m.seconds("raw")) + " of it); " +
                             times(m.seconds("fair") / m.seconds("ours")) + " of the barging mutex's cycle; over the barging floor the +" +
                             micros(extra) + " ≈ Redis running its scripts +" +
                             micros((fair_server - raw_server) / 1e6) + " (" + fixed(fair_server, 1) +
                             " µs a cycle, " + fixed(m.counter("fair_server_scripts"), 1) +
                             " scripts; baseline " + fixed(raw_server, 1) + " µs) + the client " +
                             micros(extra - (fair_server - raw_server) / 1e6) + "; context switches per cycle " +
                             fixed(m.counter("fair_switches"), 1);
                 row.data["fair_server_us"] = fair_server;
                 row.data["fair_over_barging"] = m.seconds("fair") / m.seconds("ours");
                 row.data["fair_over_barging_floor"] = m.seconds("fair") / m.seconds("raw");
                 return row;
             });
}

}  // namespace lockstep::bench
