// Puts a server behind a FaultProxy by rewriting the URL a client opens: the proxy's upstream
// host:port in the URL's authority becomes the proxy's own address, and everything else (scheme,
// credentials, path, query) stays as it was. Works for every URL form lockstep opens (redis://,
// redis-fair://, mysql://, zookeeper://h:p,h:p, redlock://h:p,...): for a list, one proxy per
// endpoint, each rewriting its own.
//
//   lockstep::FaultProxy proxy("127.0.0.1", 6379);
//   proxied_redis_url("redis://:pw@127.0.0.1:6379/0?socket_timeout=300ms", proxy)
//       == "redis://:pw@127.0.0.1:<proxy port>/0?socket_timeout=300ms"
//
//   for (const auto& e : url_endpoints(zk_url)) proxies.push_back(std::make_unique<FaultProxy>(e.host,
//   e.port)); for (const auto& p : proxies) zk_url = proxied_url(zk_url, *p);
//
// Thread safety: plain functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "lockstep/servers/fault_proxy.h"

namespace lockstep {

struct UrlEndpoint {
    std::string host;
    int port = 0;
};

// The host:port endpoints of a URL's authority (after "scheme://" and "user:password@", up to the
// first '/' or '?'), in order. A missing port is the scheme's default (redis 6379, mysql 3306,
// zookeeper 2181). ConfigError when there is no "://", a host is empty, or a port is not a number.
std::vector<UrlEndpoint> url_endpoints(std::string_view url);

// `url` with the endpoint that `proxy` forwards to replaced by the proxy's address ("localhost"
// and "127.0.0.1" name the same host). ConfigError when the URL does not name that endpoint.
std::string proxied_url(std::string_view url, const FaultProxy& proxy);

// proxied_url for one scheme family, ConfigError for another: redis:// and redis-fair:// (a
// cluster or sentinel URL is refused: its nodes hand out each other's real addresses), mysql://,
// zookeeper://.
std::string proxied_redis_url(const std::string& redis_url, const FaultProxy& proxy);
std::string proxied_mysql_url(const std::string& mysql_url, const FaultProxy& proxy);
std::string proxied_zookeeper_url(const std::string& zookeeper_url, const FaultProxy& proxy);

// `url` with query parameter `key` set to `value` (replaced when present, appended otherwise).
std::string with_query_param(const std::string& url, const std::string& key, const std::string& value);

}  // namespace lockstep
