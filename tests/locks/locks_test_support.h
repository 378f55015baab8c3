// Shared by the lock tests: Redis clients for the private server, and child processes.
//
// Multi-process tests re-execute this test binary (/proc/self/exe) with LOCKSTEP_LOCKS_CHILD
// naming a role; a static initializer (child_roles.cpp) runs that role before gtest's main and
// _exits. The child gets everything through its environment and talks to the parent by lines
// on stdin/stdout. It never shares a connection with the parent.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "lockstep/cache/redis_client.h"
#include "lockstep/locks/lock_client.h"
#include "lockstep/servers/child_process.h"

namespace lockstep::test {

// A RedisClient on the test Redis with a pool large enough for 8 threads plus the watchdog.
std::unique_ptr<RedisClient> make_redis();

// One lock client with its own Redis client (so two of them behave like two processes:
// separate pools, separate subscriber connections, different client ids).
struct LockProcess {
    explicit LockProcess(const std::string& prefix, LockClientOptions options = {});
    std::unique_ptr<RedisClient> redis;
    std::unique_ptr<RedisLockClient> locks;
};

// This test binary re-executed as `role` (LOCKSTEP_LOCKS_CHILD) with `env` added to the
// environment, after the Redis/MySQL URLs (LOCKSTEP_LOCKS_REDIS, LOCKSTEP_LOCKS_MYSQL) that `env`
// may replace. One thread uses a Child at a time (lockstep::testing::ChildProcess).
class Child : public lockstep::testing::ChildProcess {
public:
    Child(const std::string& role, const std::map<std::string, std::string>& env);
};

}  // namespace lockstep::test

namespace lockstep::test {

// `threads` threads do `total` non-atomic increments (GET, +1, SET) of Redis key `key` in all,
// each inside RedisMutex(`name`) of `locks`. Returns how many increments threw.
int run_locked_increments(RedisClient& redis, RedisLockClient& locks, const std::string& name,
                          const std::string& key, int threads, int total);

}  // namespace lockstep::test
