// LocalRedisGroup: N independent private Redis masters (no replication, no cluster bus, no
// sentinel) for Redlock's tests, the demo and the benchmarks. Each node is one LocalServers (its
// own temp dir and reaper: nothing survives this process, even a SIGKILL of it), started without
// persistence, so a restarted node comes back EMPTY, as after a crash of a cache-only master
// (the case Redlock's fencing must survive, docs/locks.md "Redlock").
//
// Zero configuration: free loopback ports, default redis-server. The constructor returns once
// every node answers PING.
//
// Thread safety: as LocalServers (one thread drives kill/start/pause/resume).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "lockstep/core/redis_options.h"

namespace lockstep {

struct LocalRedisGroupOptions {
    int masters = 5;
    std::string redis_server = "redis-server";
    std::chrono::milliseconds start_timeout{std::chrono::seconds(30)};
};

class LocalRedisGroup {
public:
    explicit LocalRedisGroup(LocalRedisGroupOptions options = {});
    ~LocalRedisGroup();  // resumes paused nodes, stops every node, removes their temp dirs
    LocalRedisGroup(const LocalRedisGroup&) = delete;
    LocalRedisGroup& operator=(const LocalRedisGroup&) = delete;

    std::size_t size() const noexcept;
    // "127.0.0.1:p1,127.0.0.1:p2,..." (every node, in start order): the host list of a
    // redlock:// URL.
    std::string hosts() const;
    // "redlock://" + hosts().
    std::string redlock_url() const;
    // One node alone, e.g. to inspect or to delete its keys.
    RedisOptions redis_options(std::size_t node) const;
    std::string redis_url(std::size_t node) const;
    int port(std::size_t node) const;
    int pid(std::size_t node) const;  // 0 while killed

    // SIGKILL and wait until gone; its data is lost (no persistence).
    void kill(std::size_t node);
    // Start again on the same port, empty; waits until it answers.
    void start(std::size_t node);
    void restart(std::size_t node);  // kill + start: the node comes back empty
    // SIGSTOP / SIGCONT: the node keeps its connections and its keys' expiry clock.
    void pause(std::size_t node);
    void resume(std::size_t node);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep
