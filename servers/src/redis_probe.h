// Internal: one Redis command over a fresh loopback TCP connection, without the cache layer
// (servers/ depends on core only). Used to wait for cluster and replication states.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace lockstep::servers_detail {

// The raw RESP reply (e.g. "$123\r\n...", "+OK\r\n", "-ERR ...\r\n"), or an empty string when the
// server does not answer within `timeout` (refused, stopped, killed).
std::string redis_probe(int port, const std::vector<std::string>& args,
                        std::chrono::milliseconds timeout = std::chrono::milliseconds(500));

// The value of `field:` in an INFO-style text ("cluster_state", "role"), or "".
std::string info_value(const std::string& text, const std::string& field);

}  // namespace lockstep::servers_detail
