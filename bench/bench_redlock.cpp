// Redlock lock cycle: lock + unlock of a RedlockLockService mutex over 5 independent masters
// (LocalRedisGroup, started here) against the single-node lock cycle (RedisMutex on the run's
// redis-server), timed call by call in one loop (paired.h). A third operation runs the same
// Redlock scripts with the masters asked one after another (fanout=sequential, the sequential
// fan-out other clients use): the second baseline, which shows what the parallel send buys.
// Two more operations measure this machine's floor for any fan-out client: one PING sent to the
// 5 masters at once then the 5 replies read, against one PING to one master, through the same
// pooled connections. Their ratio is what 5 servers answering at once cost here, whatever the
// client does (on 2 shared vCPUs the 5 redis-servers are woken and scheduled in turn).
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "families.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/locks/redis_mutex.h"
#include "lockstep/locks/redlock_lock_service.h"
#include "lockstep/servers/local_redis_group.h"
#include "paired.h"

namespace lockstep::bench {

namespace {
constexpr const char* kRedlockBench = "redlock_cycle/paired";
}  // namespace

void register_redlock(Environment& env, Plan& plan) {
    const Budget& b = env.budget();
    // Five loopback masters on this machine: the fan-out's cost, not a network's.
    auto group = std::make_shared<LocalRedisGroup>(LocalRedisGroupOptions{});
    LockServiceOptions so;
    so.prefix = env.prefix();
    auto parallel = std::make_shared<RedlockLockService>(parse_redlock_url(group->redlock_url()), so);
    auto sequential =
        std::make_shared<RedlockLockService>(parse_redlock_url(group->redlock_url() + "?fanout=sequential"), so);
    auto single = std::make_shared<RedisMutex>(env.locks(), "bench-redlock-single");
    auto pinged = std::make_shared<std::vector<std::unique_ptr<RedisClient>>>();
    for (std::size_t i = 0; i < group->size(); ++i) pinged->push_back(std::make_unique<RedisClient>(group->redis_options(i)));

    benchmark::RegisterBenchmark(kRedlockBench,
                                 [=](benchmark::State& state) {
                                     auto ours = parallel->make_mutex("bench-redlock");
                                     auto seq = sequential->make_mutex("bench-redlock-seq");
                                     const std::vector<TimedOp> ops = {
                                         {"ours",
                                          [&] {
                                              ours->lock();
                                              ours->unlock();
                                          }},
                                         {"single",
                                          [&] {
                                              single->lock();
                                              single->unlock();
                                          }},
                                         {"sequential",
                                          [&] {
                                              seq->lock();
                                              seq->unlock();
                                          }},
                                         {"ping_fanout",
                                          [&] {
                                              std::vector<std::optional<PooledRedisConnection>> c(pinged->size());
                                              for (std::size_t i = 0; i < c.size(); ++i) {
                                                  c[i].emplace((*pinged)[i]->connection());
                                                  c[i].value()->send({"PING"});
                                              }
                                              for (auto& one : c) one.value()->receive();
                                          }},
                                         {"ping_one",
                                          [&] {
                                              auto one = pinged->front()->connection();
                                              one->send({"PING"});
                                              one->receive();
                                          }},
                                     };
                                     try {
                                         run_paired(state, ops);
                                     } catch (const std::exception& e) {
                                         state.SkipWithError(e.what());
                                     }
                                     (void)group;  // the masters live as long as the benchmark
                                 })
        ->Unit(benchmark::kMicrosecond)
        ->MinTime(b.latency_min_time)
        ->Repetitions(b.latency_repetitions);

    // Given a cluster URL the single lock still lives on one node (its name's slot's master).
    const char* single_label = env.redis_options().topology == RedisTopology::Cluster
                                   ? "RedisMutex lock+unlock (1 cluster master)"
                                   : "RedisMutex lock+unlock (1 node)";
    // Judged against this machine's floor for any fan-out client: on 2 shared vCPUs 5 masters
    // answering at once cost several times one (the redis-servers are woken and scheduled in
    // turn), whatever the client does. The ratio is Redlock ÷ one node, divided by that floor:
    // what Redlock costs beyond asking 5 servers at once.
    plan.add(row_order::kRedlock, "Redlock lock cycle, 5 masters", "≤ 1.2× the fan-out floor", {kRedlockBench},
             [single_label](const Results& r) {
        const MedianRepetition m(r, kRedlockBench, "ours", "single");
        TableRow row = paired_latency_row(m, "ours", "single", 1.3, "Redlock lock+unlock (parallel, 5 masters)",
                                          single_label);
        const double ours = m.seconds("ours");
        const double seq = m.seconds("sequential");
        const double floor = m.seconds("ping_fanout") / m.seconds("ping_one");
        const double over_one_node = m.ratio();
        const double over_floor = over_one_node / floor;
        row.ratio = times(over_floor);
        row.verdict = over_floor <= 1.2 ? Verdict::Met : Verdict::Missed;
        row.notes = "÷ one node " + times(over_one_node) + ", ÷ this machine's fan-out floor (a PING to the 5 masters "
                    "at once ÷ a PING to one = " + fixed(floor, 2) + "×) " + times(over_floor) +
                    "; second baseline: the same Redlock scripts to the 5 masters one after another " + micros(seq) +
                    " (parallel is " + fixed(seq / ours, 2) +
                    "× faster); a Redlock cycle is 2 rounds (acquire, release), each as slow as its slowest master";
        row.data["sequential_seconds"] = seq;
        row.data["fanout_floor_ratio"] = floor;
        row.data["ratio_over_one_node"] = over_one_node;
        row.data["ratio"] = over_floor;
        row.data["max_ratio"] = 1.2;
        return row;
    });
}

}  // namespace lockstep::bench
