// The worker processes of the multi-process families (the contended hand-over, the scale
// family's process curve): `lockstep-bench --handover-worker PREFIX LOCK THREADS START END`
// started from this same binary, cycling one lock between START and END (steady-clock
// nanoseconds) and printing one line of results (bench_handover.cpp, handover_worker_main).
//
// Thread safety: plain functions; a worker is finished once, by one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "lockstep/core/redis_options.h"
#include "lockstep/servers/child_process.h"

namespace lockstep::bench {

// The Redis URL reaches a worker through this environment variable (it may hold a password),
// never through its command line.
inline constexpr const char* kWorkerUrlVariable = "LOCKSTEP_BENCH_WORKER_REDIS_URL";

std::int64_t to_ns(std::chrono::steady_clock::time_point t);
std::chrono::steady_clock::time_point from_ns(std::int64_t ns);

// Starts a worker with its stdout on a pipe. Throws Error when it cannot be started. Destroying
// the worker unfinished kills and reaps it.
std::unique_ptr<testing::ChildProcess> spawn_handover_worker(const RedisOptions& redis, const std::string& prefix, const std::string& lock,
                                    int threads, std::chrono::steady_clock::time_point start,
                                    std::chrono::steady_clock::time_point end);
// Reads the worker's line of results and reaps it. Throws Error (with what it printed) when it
// did not exit with status 0, or has not closed its stdout within 10 minutes (it hangs).
std::string finish_handover_worker(testing::ChildProcess& worker);

}  // namespace lockstep::bench
