// LocalRedisSentinel: a private Sentinel-guarded Redis for the tests and the demo: one master,
// one replica, three sentinels (quorum 2, down-after-milliseconds `down_after`), each process a
// LocalServers (own temp dir and reaper). The constructor returns once the replica is in sync
// and every sentinel sees the replica and the two other sentinels, so a failover can happen.
//
// Nodes: 0 = the first master, 1 = the first replica, 2..4 = the sentinels. A test may kill,
// restart, pause or resume any of them. Sentinel configs live in a temp dir of this object
// (removed by the destructor; the processes are reaped by their LocalServers either way).
//
// With `tls`, every process also listens on a TLS port (one CA, certificates from
// make_tls_certificates naming 127.0.0.1), replication and the sentinels' links to the servers
// and to each other are TLS (tls-replication), so the sentinels report TLS ports; url() is the
// rediss+sentinel:// URL of the sentinels' TLS ports. The plain ports stay open for the helper's
// own probes.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "lockstep/core/redis_options.h"
#include "lockstep/servers/tls_certificates.h"

namespace lockstep {

struct LocalRedisSentinelOptions {
    std::string master_name = "mymaster";
    std::chrono::milliseconds down_after{1000};
    std::chrono::milliseconds failover_timeout{5000};
    std::string redis_server = "redis-server";
    std::chrono::milliseconds start_timeout{std::chrono::seconds(30)};
    // Also serve TLS, and make url() a rediss+sentinel:// URL (see above).
    bool tls = false;
};

class LocalRedisSentinel {
public:
    static constexpr std::size_t kMaster = 0;
    static constexpr std::size_t kReplica = 1;
    static constexpr std::size_t kFirstSentinel = 2;

    explicit LocalRedisSentinel(LocalRedisSentinelOptions options = {});
    ~LocalRedisSentinel();
    LocalRedisSentinel(const LocalRedisSentinel&) = delete;
    LocalRedisSentinel& operator=(const LocalRedisSentinel&) = delete;

    // "redis+sentinel://127.0.0.1:s1,127.0.0.1:s2,127.0.0.1:s3/<master_name>"; with tls
    // "rediss+sentinel://127.0.0.1:t1,.../<master_name>?tls_ca=<the CA>".
    std::string url() const;
    RedisOptions redis_options() const;

    std::size_t size() const noexcept;  // 5
    int port(std::size_t node) const;
    int pid(std::size_t node) const;
    // With tls: the node's TLS port and the certificates (ConfigError without tls).
    int tls_port(std::size_t node) const;
    const TlsCertificates& tls_certificates() const;
    void kill(std::size_t node);
    void start(std::size_t node);
    void pause(std::size_t node);
    void resume(std::size_t node);

    // The master's port as the first answering sentinel reports it (0 if none answers); with tls
    // a TLS port.
    int master_port_by_sentinels() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep
