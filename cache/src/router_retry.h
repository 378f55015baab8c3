// Internal: what the topology routers (Cluster, Sentinel) and the script runner share when they
// read an error reply and retry a command.
#pragma once

#include <algorithm>
#include <chrono>
#include <string_view>
#include <thread>

#include "lockstep/cache/redis_reply.h"

namespace lockstep::detail {

// The reply is a Redis error whose message starts with `code` ("MOVED ", "NOSCRIPT", ...).
inline bool is_error_reply(const RedisReply& r, std::string_view code) {
    return r.is_error() && std::string_view(r.error_message()).starts_with(code);
}

// Waits before retry `attempt` (0, 1, ...): 10, 20, 40, 80, then 100 ms, so a topology change
// in progress (failover, resharding) has time to finish without a busy loop.
inline void back_off_before_retry(int attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(10 << std::min(attempt, 4), 100)));
}

}  // namespace lockstep::detail
