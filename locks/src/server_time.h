// The lock server's clock, as every backend's LockService::server_time() reads it. Scheduled
// jobs (coordination/job_lock.h) compute their slot from it, never from a node's own clock.
#pragma once

#include <chrono>

namespace lockstep {

class RedisClient;

namespace locks_detail {

// Redis TIME (seconds and microseconds of the server's clock). On a cluster the client sends it
// to some master (a keyless command); on a sentinel setup, to the current master.
// ProtocolError when the reply is not TIME's two integers.
std::chrono::system_clock::time_point redis_server_time(RedisClient& redis);

}  // namespace locks_detail
}  // namespace lockstep
