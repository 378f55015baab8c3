#include "lockstep/servers/proxied_lock_service.h"

#include <sstream>
#include <utility>

#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"
#include "lockstep/core/uri.h"
#include "lockstep/locks/lock_service.h"
#include "lockstep/servers/proxied_url.h"

namespace lockstep {

namespace {

std::string ms_text(std::chrono::milliseconds d) { return std::to_string(d.count()) + "ms"; }

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

bool is_redis_topology_url(const std::string& url) {
    for (const char* scheme : {"redis+cluster://", "redis+sentinel://", "redis-fair+cluster://", "redis-fair+sentinel://"}) {
        if (starts_with(url, scheme)) return true;
    }
    return false;
}

// "127.0.0.1:7001" (a CLUSTER NODES address, "ip:port@cport[,hostname]" trimmed by the caller).
RedisEndpoint endpoint_of(const std::string& address) {
    const auto colon = address.rfind(':');
    if (colon == std::string::npos) throw ConfigError("address", "'" + address + "' is not host:port");
    return RedisEndpoint{address.substr(0, colon), std::stoi(address.substr(colon + 1))};
}

RedisOptions direct_options(const RedisOptions& topology, const RedisEndpoint& node, bool sentinel) {
    RedisOptions o;
    o.host = node.host;
    o.port = node.port;
    if (!sentinel) {
        o.user = topology.user;
        o.password = topology.password;
    }
    o.pool_size = 1;
    return o;
}

// Every data node the servers of a Cluster or Sentinel URL announce (masters and replicas), asked
// directly of the first seed or sentinel that answers.
std::vector<RedisEndpoint> announced_nodes(const RedisOptions& topology) {
    std::string last_error = "no seed node";
    for (const RedisEndpoint& seed : topology.nodes) {
        try {
            std::vector<RedisEndpoint> nodes;
            if (topology.topology == RedisTopology::Cluster) {
                RedisClient redis(direct_options(topology, seed, false));
                std::istringstream lines(redis.command({"CLUSTER", "NODES"}).str());
                for (std::string line; std::getline(lines, line);) {
                    std::istringstream fields(line);
                    std::string id, address;
                    fields >> id >> address;
                    address = address.substr(0, address.find('@'));
                    if (!address.empty() && address[0] != ':') nodes.push_back(endpoint_of(address));
                }
            } else {
                RedisClient redis(direct_options(topology, seed, true));
                const RedisReply master =
                    redis.command({"SENTINEL", "get-master-addr-by-name", topology.sentinel_master});
                if (master.is_nil()) throw ConfigError("sentinel_master", "no sentinel knows the master");
                nodes.push_back(RedisEndpoint{master.elements().at(0).str(), std::stoi(master.elements().at(1).str())});
                const RedisReply replicas = redis.command({"SENTINEL", "replicas", topology.sentinel_master});
                for (const RedisReply& replica : replicas.elements()) {
                    std::string ip, port;
                    const auto& kv = replica.elements();
                    for (std::size_t i = 0; i + 1 < kv.size(); i += 2) {
                        if (kv[i].str() == "ip") ip = kv[i + 1].str();
                        if (kv[i].str() == "port") port = kv[i + 1].str();
                    }
                    if (!ip.empty() && !port.empty()) nodes.push_back(RedisEndpoint{ip, std::stoi(port)});
                }
            }
            return nodes;
        } catch (const Error& e) {
            last_error = e.what();
        }
    }
    throw ConnectionError("proxying a Redis topology: no seed answered (" + last_error + ")");
}

// A Cluster or Sentinel URL: its seeds or sentinels behind proxies (rewritten in the URL), and
// every data node they announce behind a proxy of its own, which the client is told to use
// instead of the announced address (RedisOptions::address_map).
std::string proxy_redis_topology(std::string url, ProxiedLockService& s) {
    std::string redis_url = url;
    if (starts_with(redis_url, "redis-fair")) redis_url = "redis" + redis_url.substr(10);
    const RedisOptions topology = parse_redis_url(redis_url);
    std::string map;
    for (const RedisEndpoint& node : announced_nodes(topology)) {
        s.proxies.push_back(std::make_unique<FaultProxy>(node.host, node.port));
        if (!map.empty()) map += ",";
        map += node.host + ":" + std::to_string(node.port) + "=" + s.proxies.back()->address();
    }
    for (const UrlEndpoint& e : url_endpoints(url)) {
        s.proxies.push_back(std::make_unique<FaultProxy>(e.host, e.port));
        url = proxied_url(url, *s.proxies.back());
    }
    return with_query_param(url, "address_map", map);
}

}  // namespace

void ProxiedLockService::blackhole() {
    for (auto& p : proxies) p->blackhole();
}
void ProxiedLockService::stall() {
    for (auto& p : proxies) p->stall();
}
void ProxiedLockService::pass() {
    for (auto& p : proxies) p->pass();
}
void ProxiedLockService::reset() {
    for (auto& p : proxies) p->reset();
}
void ProxiedLockService::refuse() {
    for (auto& p : proxies) p->refuse();
}
void ProxiedLockService::latency(std::chrono::milliseconds fixed, FaultDirection direction) {
    for (auto& p : proxies) p->latency(fixed, std::chrono::milliseconds(0), direction);
}

ProxiedLockService open_proxied_lock_service(std::string url, LockServiceOptions options, ProxiedTimeouts timeouts) {
    ProxiedLockService s;
    if (is_redis_topology_url(url)) {
        url = proxy_redis_topology(std::move(url), s);
    } else {
        for (const UrlEndpoint& e : url_endpoints(url)) {
            s.proxies.push_back(std::make_unique<FaultProxy>(e.host, e.port));
            url = proxied_url(url, *s.proxies.back());
        }
    }
    if (starts_with(url, "redis") || starts_with(url, "redlock://")) {
        url = with_query_param(url, "socket_timeout", ms_text(timeouts.redis_timeout));
        url = with_query_param(url, "connect_timeout", ms_text(timeouts.redis_timeout));
    } else if (starts_with(url, "mysql://")) {
        url = with_query_param(url, "read_timeout", ms_text(timeouts.mysql_timeout));
        url = with_query_param(url, "write_timeout", ms_text(timeouts.mysql_timeout));
    }
    s.service = open_lock_service(url, std::move(options));
    return s;
}

}  // namespace lockstep
