// redis_time: the Redis server's clock (TIME), for callers that must not trust their own clock
// (scheduled jobs compute their slot from the lock server's time, coordination/job_lock.h).
//
// Thread safety: as RedisClient (any thread).
#pragma once

#include <chrono>

namespace lockstep {

class RedisClient;

// TIME: seconds and microseconds of the server's clock. On a cluster the client sends it to some
// master (a keyless command); behind Sentinel, to the current master. ProtocolError when the
// reply is not TIME's two integers; the client's errors otherwise.
std::chrono::system_clock::time_point redis_server_time(RedisClient& redis);

}  // namespace lockstep
