// Shared by the lock tests: Redis clients for the private server, and child processes.
//
// Multi-process tests re-execute this test binary (/proc/self/exe) with LOCKSTEP_LOCKS_CHILD
// naming a role; a static initializer (child_roles.cpp) runs that role before gtest's main and
// _exits. The child gets everything through its environment and talks to the parent by lines
// on stdin/stdout. It never shares a connection with the parent.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "lockstep/cache/redis_client.h"
#include "lockstep/locks/lock_client.h"

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

class Child {
public:
    // Starts this binary as `role` with `env` added to the environment (plus the Redis/MySQL URLs).
    Child(const std::string& role, const std::map<std::string, std::string>& env);
    ~Child();  // SIGKILLs it if still running, and reaps it
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;

    // The next line the child printed (without '\n'), or nullopt on timeout / EOF.
    std::optional<std::string> read_line(std::chrono::milliseconds timeout);
    // Reads lines until one starts with `prefix`; returns it (nullopt on timeout).
    std::optional<std::string> expect(const std::string& prefix, std::chrono::milliseconds timeout);
    void send(const std::string& line);
    void signal(int sig);
    // Waits for exit; returns the exit code, or 128 + signal.
    int wait();
    pid_t pid() const { return pid_; }

private:
    pid_t pid_ = -1;
    int in_ = -1;   // child's stdin (we write)
    int out_ = -1;  // child's stdout (we read)
    std::string buffer_;
    bool reaped_ = false;
    int status_ = 0;
};

}  // namespace lockstep::test

namespace lockstep::test {

// `threads` threads do `total` non-atomic increments (GET, +1, SET) of Redis key `key` in all,
// each inside RedisMutex(`name`) of `locks`. Returns how many increments threw.
int run_locked_increments(RedisClient& redis, RedisLockClient& locks, const std::string& name,
                          const std::string& key, int threads, int total);

}  // namespace lockstep::test
