// The binlog follower as the bench families start it: a 100 ms heartbeat, so a caught-up follower
// knows it within one; no flush on a fresh start (the families bind prefixes of their own, and a
// first start only saves the position the timed start resumes from).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "lockstep/invalidation/binlog_invalidator.h"

namespace lockstep::bench {

inline BinlogInvalidatorOptions bench_follower_options(std::string name, std::uint32_t server_id) {
    BinlogInvalidatorOptions o;
    o.name = std::move(name);
    o.server_id = server_id;
    o.heartbeat = std::chrono::milliseconds(100);
    o.flush_on_fresh_start = false;
    return o;
}

}  // namespace lockstep::bench
