// LocalRedisCluster: a private Redis Cluster for the tests, the demo and the benchmarks.
//
// `masters` redis-servers with --cluster-enabled and `replicas_per_master` replicas each, every
// node one LocalServers (so each has its own temp dir and reaper: nothing survives this process,
// even a SIGKILL of it), joined with `redis-cli --cluster create ... --cluster-yes`. The
// constructor returns once every node reports cluster_state:ok and every replica is attached.
//
// Nodes are numbered 0..size()-1 in start order; redis-cli makes the first `masters` nodes the
// masters. A test may kill, restart, pause (SIGSTOP) or resume any node; a killed master's
// replica is promoted by the cluster after `node_timeout` (+ an election). Restarted nodes keep
// their nodes.conf (and so their cluster identity) but not their data: a restarted master
// comes back empty, as after a crash without persistence.
//
// With `tls`, every node also listens on a TLS port (certificates from make_tls_certificates,
// one CA for all nodes; the server certificate names 127.0.0.1) and speaks TLS on the cluster bus
// and for replication (tls-cluster, tls-replication); url() is then the rediss+cluster:// URL of
// the TLS ports. The plain ports stay open for the helper's own probes and redis-cli; a TLS
// client is told TLS ports only (CLUSTER SLOTS, MOVED, ASK).
//
// Thread safety: as LocalServers (one thread drives it).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/core/redis_options.h"
#include "lockstep/servers/tls_certificates.h"

namespace lockstep {

struct LocalRedisClusterOptions {
    int masters = 3;
    int replicas_per_master = 1;
    // cluster-node-timeout: how long a node may be unreachable before its replica takes over.
    std::chrono::milliseconds node_timeout{1000};
    std::string redis_server = "redis-server";
    std::string redis_cli = "redis-cli";  // Debian: package redis-tools
    std::chrono::milliseconds start_timeout{std::chrono::seconds(30)};
    // Also serve TLS, and make url() a rediss+cluster:// URL (see above).
    bool tls = false;
};

class LocalRedisCluster {
public:
    // Throws ConfigError when a binary is missing, ConnectionError when the cluster does not
    // form within start_timeout.
    explicit LocalRedisCluster(LocalRedisClusterOptions options = {});
    ~LocalRedisCluster();
    LocalRedisCluster(const LocalRedisCluster&) = delete;
    LocalRedisCluster& operator=(const LocalRedisCluster&) = delete;

    // "redis+cluster://127.0.0.1:p0,127.0.0.1:p1,..." (every node is a seed); with tls
    // "rediss+cluster://127.0.0.1:t0,...?tls_ca=<the CA>".
    std::string url() const;
    RedisOptions redis_options() const;

    std::size_t size() const noexcept;
    int port(std::size_t node) const;
    int pid(std::size_t node) const;  // 0 while killed
    // With tls: the node's TLS port and the certificates (ConfigError without tls).
    int tls_port(std::size_t node) const;
    const TlsCertificates& tls_certificates() const;

    void kill(std::size_t node);     // SIGKILL, wait until gone
    void start(std::size_t node);    // same port and dir; waits for PING
    void restart(std::size_t node);  // kill + start
    void pause(std::size_t node);    // SIGSTOP
    void resume(std::size_t node);   // SIGCONT

    // Nodes that answer and call themselves master now (INFO replication).
    std::vector<std::size_t> masters() const;
    // The node serving `slot` as master right now, per the first answering node's CLUSTER NODES
    // view; -1 if none answers.
    int master_of_slot(int slot) const;
    // Waits until every running node reports cluster_state:ok (after a failover or a restart).
    // Returns false after `timeout`.
    bool wait_until_ok(std::chrono::milliseconds timeout) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep
