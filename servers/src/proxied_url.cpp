#include "lockstep/servers/proxied_url.h"

#include <charconv>

#include "lockstep/core/error.h"

namespace lockstep {

namespace {

// Where the host list of a URL is: [begin, end) of the text after the credentials.
struct Authority {
    std::string_view scheme;
    std::size_t begin = 0;
    std::size_t end = 0;
};

Authority authority_of(std::string_view url) {
    const std::size_t sep = url.find("://");
    if (sep == std::string_view::npos || sep == 0) throw ConfigError("URL", "no scheme:// in the URL");
    Authority a;
    a.scheme = url.substr(0, sep);
    a.begin = sep + 3;
    a.end = url.find_first_of("/?", a.begin);
    if (a.end == std::string_view::npos) a.end = url.size();
    // Credentials end at the last '@' of the authority (a password may hold an encoded '@' only).
    const std::size_t at = url.substr(a.begin, a.end - a.begin).rfind('@');
    if (at != std::string_view::npos) a.begin += at + 1;
    return a;
}

int default_port(std::string_view scheme) {
    if (scheme.rfind("redis", 0) == 0 || scheme == "redlock") return 6379;
    if (scheme == "mysql") return 3306;
    if (scheme == "zookeeper") return 2181;
    return 0;
}

UrlEndpoint parse_endpoint(std::string_view text, std::string_view scheme) {
    UrlEndpoint e;
    std::string_view port_text;
    if (!text.empty() && text.front() == '[') {  // [IPv6]:port
        const std::size_t close = text.find(']');
        if (close == std::string_view::npos)
            throw ConfigError("host", "unclosed '[' in " + std::string(text));
        e.host = std::string(text.substr(1, close - 1));
        if (close + 1 < text.size() && text[close + 1] == ':') port_text = text.substr(close + 2);
    } else {
        const std::size_t colon = text.rfind(':');
        e.host = std::string(text.substr(0, colon));
        if (colon != std::string_view::npos) port_text = text.substr(colon + 1);
    }
    if (e.host.empty()) throw ConfigError("host", "empty host in '" + std::string(text) + "'");
    e.port = default_port(scheme);
    if (!port_text.empty()) {
        const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), e.port);
        if (ec != std::errc() || end != port_text.data() + port_text.size() || e.port < 1 || e.port > 65535) {
            throw ConfigError("port", "not a port: '" + std::string(port_text) + "'");
        }
    }
    return e;
}

std::string canonical_host(const std::string& host) {
    return host == "localhost" ? "127.0.0.1" : host;
}

std::string proxied_url_of_schemes(const std::string& url, const FaultProxy& proxy,
                                   std::initializer_list<std::string_view> schemes, const char* family) {
    const std::string_view scheme = authority_of(url).scheme;
    for (std::string_view s : schemes) {
        if (scheme == s) return proxied_url(url, proxy);
    }
    throw ConfigError("scheme",
                      "not a " + std::string(family) + " URL scheme: '" + std::string(scheme) + "'");
}

}  // namespace

std::vector<UrlEndpoint> url_endpoints(std::string_view url) {
    const Authority a = authority_of(url);
    std::vector<UrlEndpoint> endpoints;
    std::size_t pos = a.begin;
    while (pos <= a.end) {
        std::size_t comma = url.find(',', pos);
        if (comma == std::string_view::npos || comma > a.end) comma = a.end;
        endpoints.push_back(parse_endpoint(url.substr(pos, comma - pos), a.scheme));
        pos = comma + 1;
    }
    return endpoints;
}

std::string proxied_url(std::string_view url, const FaultProxy& proxy) {
    const Authority a = authority_of(url);
    const std::string upstream_host = canonical_host(proxy.upstream_host());
    std::string out(url.substr(0, a.begin));
    bool found = false;
    std::size_t pos = a.begin;
    while (pos <= a.end) {
        std::size_t comma = url.find(',', pos);
        if (comma == std::string_view::npos || comma > a.end) comma = a.end;
        const std::string_view text = url.substr(pos, comma - pos);
        const UrlEndpoint e = parse_endpoint(text, a.scheme);
        if (!found && canonical_host(e.host) == upstream_host && e.port == proxy.upstream_port()) {
            out += proxy.address();
            found = true;
        } else {
            out += text;
        }
        if (comma < a.end) out += ',';
        pos = comma + 1;
    }
    if (!found) {
        throw ConfigError("URL", "names no endpoint " + proxy.upstream_address() + " (the proxy's upstream)");
    }
    out += url.substr(a.end);
    return out;
}

std::string proxied_redis_url(const std::string& redis_url, const FaultProxy& proxy) {
    return proxied_url_of_schemes(redis_url, proxy, {"redis", "redis-fair"}, "redis");
}

std::string proxied_mysql_url(const std::string& mysql_url, const FaultProxy& proxy) {
    return proxied_url_of_schemes(mysql_url, proxy, {"mysql"}, "mysql");
}

std::string proxied_zookeeper_url(const std::string& zookeeper_url, const FaultProxy& proxy) {
    return proxied_url_of_schemes(zookeeper_url, proxy, {"zookeeper"}, "zookeeper");
}

}  // namespace lockstep

namespace lockstep {

std::string with_query_param(const std::string& url, const std::string& key, const std::string& value) {
    const std::size_t q = url.find('?');
    std::string out = url.substr(0, q) + "?";
    bool first = true;
    if (q != std::string::npos) {
        std::size_t pos = q + 1;
        while (pos <= url.size()) {
            std::size_t amp = url.find('&', pos);
            if (amp == std::string::npos) amp = url.size();
            const std::string p = url.substr(pos, amp - pos);
            if (!p.empty() && p.rfind(key + "=", 0) != 0) {
                out += (first ? "" : "&") + p;
                first = false;
            }
            pos = amp + 1;
        }
    }
    return out + (first ? "" : "&") + key + "=" + value;
}

}  // namespace lockstep
