// How to reach one Redis server and how many connections to keep to it. Plain struct: every
// field has a safe default; `parse_redis_url` (uri.h) fills one from a redis:// URL.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace lockstep {

struct RedisOptions {
    std::string host = "127.0.0.1";
    int port = 6379;
    // AUTH: empty user means the legacy single-password form `AUTH password`.
    std::string user;
    std::string password;
    // SELECT this logical database on every new connection.
    int db = 0;
    // Deadline for establishing a TCP connection (a black-holed host fails in this time).
    std::chrono::milliseconds connect_timeout{1000};
    // Deadline for each socket read and write once connected.
    std::chrono::milliseconds socket_timeout{1000};
    // Connections kept by the pool at most; callers beyond this wait.
    std::size_t pool_size = 8;
    // How long a caller waits for a pooled connection before a TimeoutError.
    std::chrono::milliseconds pool_wait_timeout{2000};
};

}  // namespace lockstep
