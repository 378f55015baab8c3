// How to reach one Redis server and how many connections to keep to it. Plain struct: every
// field has a safe default; `parse_redis_url` (uri.h) fills one from a redis:// or rediss:// URL.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace lockstep {

namespace detail {
class TlsContextShare;  // cache/src/tls_session.h
}  // namespace detail

// Which shape of Redis deployment the options describe (chosen by the URL scheme, uri.h).
enum class RedisTopology {
    Standalone,  // redis://        one server
    Cluster,     // redis+cluster:// Redis Cluster; `nodes` are seed nodes, the map is asked from them
    Sentinel,    // redis+sentinel:// `nodes` are sentinels, asked for `sentinel_master`'s address
};

// One host:port of a topology URL.
struct RedisEndpoint {
    std::string host;
    int port = 6379;
    bool operator==(const RedisEndpoint&) const = default;
};

// How much of the server's certificate a TLS connection checks (docs/tls.md).
enum class RedisTlsVerify {
    Full,  // the chain up to a trusted CA, and the host name (or IP address) it was reached by
    Ca,    // the chain only: any name signed by a trusted CA is accepted
    None,  // nothing: encrypts, but a man in the middle is not noticed (tests, trusted links)
};

// TLS for every connection of the options (rediss://, rediss+cluster://, rediss+sentinel://:
// every Cluster node, the sentinels and the master alike). Off by default.
struct RedisTlsOptions {
    bool enabled = false;
    // PEM file of the CA certificates to trust; empty: the system's default store.
    std::string ca_file;
    // PEM client certificate (chain) and its private key, for a server that asks for one; both
    // or neither.
    std::string cert_file;
    std::string key_file;
    RedisTlsVerify verify = RedisTlsVerify::Full;
    // The name sent as SNI and checked against the certificate; empty: the host connected to
    // (an IP address is checked as an address and not sent as SNI).
    std::string server_name;
    // Set by RedisClient (leave empty): the one SSL_CTX its connections share, so the files are
    // read once per client, not per connection. Used only while ca_file, cert_file, key_file and
    // verify are still the ones it was made for.
    std::shared_ptr<detail::TlsContextShare> context_share;
};

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
    // A pooled connection idle at least this long is checked before it is lent (one non-blocking
    // recv: has the server closed it, are there bytes nobody asked for?); one returned more
    // recently is lent without the system call. 0: check on every lend. The trade-off is in
    // docs/cache.md ("Lending a pooled connection").
    std::chrono::milliseconds pool_check_idle_after{100};

    // Topology (additive; Standalone keeps every field above meaning what it always did).
    RedisTopology topology = RedisTopology::Standalone;
    // Cluster seed nodes or sentinels, in URL order; host/port above are the first of them.
    std::vector<RedisEndpoint> nodes;
    // Sentinel: the monitored master's name (the URL's path).
    std::string sentinel_master;
    // Cluster / Sentinel: how long a command keeps retrying while the cluster reports
    // CLUSTERDOWN / TRYAGAIN or a master is unreachable (a failover takes node-timeout plus an
    // election, ~2 s with node-timeout 1 s). After it, a ClusterUnavailableError (RetryCall).
    std::chrono::milliseconds failover_wait{3000};
    // Addresses to connect to instead of the ones given: each (from, to) pair sends a connection
    // meant for `from` to `to`. For a client that reaches a Cluster's nodes or a Sentinel's master
    // and replicas through NAT, port forwarding or a proxy, where the servers announce addresses
    // the client cannot use (CLUSTER SLOTS, MOVED/ASK, SENTINEL get-master-addr-by-name). Applies
    // to every address the Cluster and Sentinel clients connect to; a standalone client connects
    // to host:port as written. URL: address_map=<host>:<port>=<host>:<port>,...
    std::vector<std::pair<RedisEndpoint, RedisEndpoint>> address_map;

    // TLS (rediss://, rediss+cluster://, rediss+sentinel://; docs/tls.md).
    RedisTlsOptions tls;
};

// The endpoint to connect to for `host`:`port`: its address_map entry, or itself.
RedisEndpoint mapped_address(const RedisOptions& options, const std::string& host, int port);

}  // namespace lockstep
