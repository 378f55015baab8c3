// Movable hold cycle: RedisMutex::acquire() + Hold::release() on a free lock, one thread, against
// the thread-owned cycle lock() + unlock() of the same mutex, timed call by call in one loop
// (paired.h). Both go through the one hold registry of the Redis client and send the same two
// scripts; the difference is what a movable hold adds: an owner number of its own and the Hold
// value (one allocation) that carries it.
#include <memory>
#include <string>
#include <vector>

#include "families.h"
#include "lockstep/locks/hold.h"
#include "lockstep/locks/redis_mutex.h"
#include "paired.h"

namespace lockstep::bench {

namespace {

constexpr const char* kHoldBench = "hold_cycle/paired";

}  // namespace

void register_hold_cycle(Environment& env, Plan& plan) {
    const Budget& b = env.budget();
    auto mutex = std::make_shared<RedisMutex>(env.locks(), "bench-hold-cycle");

    benchmark::RegisterBenchmark(kHoldBench,
                                 [=](benchmark::State& state) {
                                     const std::vector<TimedOp> ops = {
                                         {"hold",
                                          [&] {
                                              Hold h = mutex->acquire();
                                              h.release();
                                          }},
                                         {"std",
                                          [&] {
                                              mutex->lock();
                                              mutex->unlock();
                                          }},
                                     };
                                     run_paired(state, ops);
                                 })
        ->Unit(benchmark::kMicrosecond)
        ->MinTime(b.latency_min_time)
        ->Repetitions(b.latency_repetitions);

    plan.add(row_order::kHoldCycle, "movable Hold cycle", "≤ 1.05×", {kHoldBench}, [](const Results& r) {
        const MedianRepetition m(r, kHoldBench, "hold", "std");
        TableRow row = paired_latency_row(m, "hold", "std", 1.05, "acquire()+release()", "lock()+unlock()");
        row.notes = "the same RedisMutex, the same scripts and registry; a Hold's owner is a number of its own "
                    "instead of the thread's (+" +
                    micros(m.seconds("hold") - m.seconds("std")) + " a cycle)";
        return row;
    });
}

}  // namespace lockstep::bench
