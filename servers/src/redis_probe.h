// Internal: one Redis command over a fresh loopback TCP connection, without the cache layer
// (servers/ depends on core only). Used to wait for cluster and replication states.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "lockstep/servers/local_servers.h"

namespace lockstep::servers_detail {

// The raw RESP reply (e.g. "$123\r\n...", "+OK\r\n", "-ERR ...\r\n"), or an empty string when the
// server does not answer within `timeout` (refused, stopped, killed).
std::string redis_probe(int port, const std::vector<std::string>& args,
                        std::chrono::milliseconds timeout = std::chrono::milliseconds(500));

// The value of `field:` in an INFO-style text ("cluster_state", "role"), or "".
std::string info_value(const std::string& text, const std::string& field);

// The options of one redis-server node of a multi-node topology (group, replication, sentinel,
// cluster): no MySQL, and never the environment's LOCKSTEP_REDIS_URL, which names one server, not
// N private ones.
LocalServersOptions private_redis_node(const std::string& redis_server, std::chrono::milliseconds start_timeout);

// The redis-server arguments of one node of a TLS topology (cluster, Sentinel): a TLS port
// `tls_port` beside the plain one (kept for these probes and redis-cli, which speak no TLS), the
// certificates of `certs` (every node presents the same server certificate, which names
// 127.0.0.1), no client certificate asked for, and TLS between the nodes too (replication,
// sentinel links, with `cluster` the cluster bus): each node announces its TLS port to TLS
// clients, in CLUSTER SLOTS, MOVED / ASK and to the sentinels.
std::vector<std::string> tls_node_args(const TlsCertificates& certs, int tls_port, bool cluster);

// Calls `condition` (each call probes the real servers) every `interval` until it holds: true, or
// false once `deadline` has passed. The topologies wait on state, never on a guessed delay.
bool poll_until(std::chrono::steady_clock::time_point deadline, std::chrono::milliseconds interval,
                const std::function<bool()>& condition);

}  // namespace lockstep::servers_detail
