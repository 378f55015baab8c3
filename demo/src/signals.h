// Signals: how the actors of a forced interleaving wait for each other, across threads and
// processes alike. They are Redis lists under the run's prefix: `post` pushes tokens, `wait`
// pops one (BLPOP), `rendezvous` is a counter plus a list. Every key expires after a minute, so
// an aborted run leaves nothing behind for long.
//
// Every wait is bounded: a forced interleaving whose partner never arrives reports that, it does
// not hang the demo.
//
// Thread safety: every member may be called from any thread (one Redis connection per call).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "lockstep/core/redis_options.h"

namespace lockstep {
class RedisClient;
}

namespace lockstep::demo {

class Signals {
public:
    // A client of its own, with a socket timeout long enough for blocking pops.
    Signals(RedisOptions redis, std::string prefix, std::size_t connections);
    ~Signals();

    // Adds `count` tokens to `name`.
    void post(const std::string& name, int count = 1);
    // Takes one token of `name`, waiting up to `timeout`. False if none came.
    bool wait(const std::string& name, std::chrono::milliseconds timeout);
    // Arrives at rendezvous `name` of `parties` and waits for all of them, up to `timeout`.
    // True when all arrived. A party that arrives after a timed-out one still counts.
    bool rendezvous(const std::string& name, int parties, std::chrono::milliseconds timeout);

    // Shared values: a counter and a string.
    long long add(const std::string& name, long long by);
    void put(const std::string& name, const std::string& value);
    std::optional<std::string> get(const std::string& name);

private:
    std::string key(const std::string& name) const;
    std::unique_ptr<RedisClient> redis_;
    std::string prefix_;
};

}  // namespace lockstep::demo
