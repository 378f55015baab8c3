#include "handover_worker.h"

#include "lockstep/core/error.h"
#include "lockstep/core/uri.h"

namespace lockstep::bench {

using Clock = std::chrono::steady_clock;

std::int64_t to_ns(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

Clock::time_point from_ns(std::int64_t ns) {
    return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(ns)));
}

std::unique_ptr<testing::ChildProcess> spawn_handover_worker(const RedisOptions& redis, const std::string& prefix,
                                                             const std::string& lock, int threads, Clock::time_point start,
                                                             Clock::time_point end) {
    return std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{"lockstep-bench", "--handover-worker", prefix, lock, std::to_string(threads),
                                 std::to_string(to_ns(start)), std::to_string(to_ns(end))},
        std::map<std::string, std::string>{{kWorkerUrlVariable, to_url(redis)}});
}

std::string finish_handover_worker(testing::ChildProcess& worker) {
    // A window lasts seconds; a worker still silent after 10 minutes hangs.
    const auto out = worker.read_to_end(std::chrono::minutes(10));
    if (!out) throw Error("handover worker process did not finish");
    const int status = worker.wait();
    if (status != 0) throw Error("handover worker process failed (status " + std::to_string(status) + "): " + *out);
    return *out;
}

}  // namespace lockstep::bench
