#include "lockstep/core/uri.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <set>
#include <vector>

#include "lockstep/core/error.h"

namespace lockstep {
namespace {

// The pieces every URL form shares. Parsing is strict: anything unexpected is a ConfigError.
struct UrlParts {
    std::string user;
    std::string password;
    bool has_userinfo = false;
    bool has_password = false;
    std::string host;
    std::optional<int> port;
    std::string path;  // without the leading '/'
    bool has_path = false;
    std::vector<std::pair<std::string, std::string>> query;
};

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::string percent_decode(std::string_view s, const std::string& part) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '%') {
            out.push_back(s[i]);
            continue;
        }
        if (i + 2 >= s.size()) {
            throw ConfigError(part, "truncated percent-escape");
        }
        int hi = hex_value(s[i + 1]);
        int lo = hex_value(s[i + 2]);
        if (hi < 0 || lo < 0) throw ConfigError(part, "invalid percent-escape");
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
    }
    return out;
}

long long parse_integer(std::string_view text, const std::string& part, long long min, long long max) {
    if (text.empty()) throw ConfigError(part, "empty number");
    long long v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc::result_out_of_range) throw ConfigError(part, "number out of range: '" + std::string(text) + "'");
    if (ec != std::errc() || p != text.data() + text.size()) {
        throw ConfigError(part, "not a number: '" + std::string(text) + "'");
    }
    if (v < min || v > max) {
        throw ConfigError(part, "'" + std::string(text) + "' is outside " + std::to_string(min) + ".." + std::to_string(max));
    }
    return v;
}

namespace {

// userinfo@hostport. The last '@' separates them: passwords may contain '@' only encoded, but be
// lenient about which '@' we take and strict about what remains. Returns the host:port part.
std::string_view take_userinfo(std::string_view authority, UrlParts& parts) {
    auto at = authority.rfind('@');
    if (at == std::string_view::npos) return authority;
    std::string_view userinfo = authority.substr(0, at);
    parts.has_userinfo = true;
    if (auto colon = userinfo.find(':'); colon != std::string_view::npos) {
        parts.user = percent_decode(userinfo.substr(0, colon), "user");
        parts.password = percent_decode(userinfo.substr(colon + 1), "password");
        parts.has_password = true;
    } else {
        parts.user = percent_decode(userinfo, "user");
    }
    return authority.substr(at + 1);
}

// host[:port] or [ipv6][:port].
void parse_host_port(std::string_view authority, UrlParts& parts) {
    if (authority.empty()) throw ConfigError("host", "missing host");
    std::string_view host = authority;
    std::string_view port;
    bool has_port = false;
    if (authority.front() == '[') {
        auto close = authority.find(']');
        if (close == std::string_view::npos) throw ConfigError("host", "unterminated '[' in IPv6 address");
        host = authority.substr(1, close - 1);
        std::string_view after = authority.substr(close + 1);
        if (!after.empty()) {
            if (after.front() != ':') throw ConfigError("host", "unexpected text after ']'");
            port = after.substr(1);
            has_port = true;
        }
    } else if (auto colon = authority.rfind(':'); colon != std::string_view::npos) {
        host = authority.substr(0, colon);
        port = authority.substr(colon + 1);
        has_port = true;
        if (host.find(':') != std::string_view::npos) {
            throw ConfigError("host", "IPv6 addresses must be written in brackets");
        }
    }
    if (host.empty()) throw ConfigError("host", "missing host");
    for (char c : host) {
        bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' || c == ':';
        if (!ok) throw ConfigError("host", "invalid character '" + std::string(1, c) + "' in '" + std::string(host) + "'");
    }
    parts.host = std::string(host);
    if (has_port) {
        if (port.empty()) throw ConfigError("port", "empty port after ':'");
        parts.port = static_cast<int>(parse_integer(port, "port", 1, 65535));
    }
}

// key=value&key=value: every name once, no empty parts.
void parse_query(std::string_view query, UrlParts& parts) {
    std::set<std::string> seen;
    while (!query.empty()) {
        auto amp = query.find('&');
        std::string_view pair = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
        if (pair.empty() || (amp != std::string_view::npos && query.empty())) {
            throw ConfigError("query", "empty parameter (stray '&')");
        }
        auto eq = pair.find('=');
        if (eq == std::string_view::npos) {
            throw ConfigError("query parameter '" + std::string(pair) + "'", "missing '=value'");
        }
        std::string key(pair.substr(0, eq));
        std::string value = percent_decode(pair.substr(eq + 1), "query parameter '" + key + "'");
        if (key.empty()) throw ConfigError("query", "parameter with an empty name");
        if (!seen.insert(key).second) throw ConfigError("query parameter '" + key + "'", "given twice");
        parts.query.emplace_back(std::move(key), std::move(value));
    }
}

}  // namespace

UrlParts split_url(std::string_view url, std::string_view scheme) {
    UrlParts parts;
    const std::string prefix = std::string(scheme) + "://";
    if (url.empty()) throw ConfigError("url", "empty URL");
    auto sep = url.find("://");
    if (sep == std::string_view::npos) {
        throw ConfigError("scheme", "missing '" + prefix + "' in '" + std::string(url) + "'");
    }
    if (url.substr(0, sep) != scheme) {
        throw ConfigError("scheme", "expected '" + std::string(scheme) + "', got '" + std::string(url.substr(0, sep)) + "'");
    }
    std::string_view rest = url.substr(sep + 3);
    // A '#' ends the URL wherever it is, also inside the query, so look for it before splitting.
    if (rest.find('#') != std::string_view::npos) throw ConfigError("url", "fragments ('#') are not allowed");

    // Split off the query first so that '/' or '@' inside it is not misread.
    std::string_view query;
    if (auto q = rest.find('?'); q != std::string_view::npos) {
        query = rest.substr(q + 1);
        rest = rest.substr(0, q);
        if (query.empty()) throw ConfigError("query", "'?' with no parameters");
    }

    std::string_view authority = rest;
    if (auto slash = rest.find('/'); slash != std::string_view::npos) {
        authority = rest.substr(0, slash);
        parts.path = std::string(rest.substr(slash + 1));
        parts.has_path = true;
    }
    parse_host_port(take_userinfo(authority, parts), parts);
    parse_query(query, parts);
    return parts;
}

std::size_t parse_pool_size(const std::string& value, const std::string& part) {
    return static_cast<std::size_t>(parse_integer(value, part, 1, 10000));
}

std::string format_duration(std::chrono::milliseconds d) { return std::to_string(d.count()) + "ms"; }

std::string percent_encode(std::string_view s) {
    static const char* hex = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : s) {
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
            out.push_back(static_cast<char>(c));
        } else {
            out.push_back('%');
            out.push_back(hex[c >> 4]);
            out.push_back(hex[c & 15]);
        }
    }
    return out;
}

// The database name of a mysql:// URL: percent-decoded ("shop%2Deu" is "shop-eu"), then 1 to 64
// printable ASCII characters other than '/', '\\' and '.' (MariaDB maps a database to a
// directory and refuses them), quotes and backticks (identifiers are quoted with backticks), and
// space. Anything else is a ConfigError naming the character.
std::string database_name(std::string_view path) {
    const std::string name = percent_decode(path, "database");
    if (name.empty()) throw ConfigError("database", "missing database name after '/'");
    if (name.size() > 64) throw ConfigError("database", "name longer than 64 characters");
    for (char c : name) {
        const auto u = static_cast<unsigned char>(c);
        const bool ok = u > 0x20 && u < 0x7f && std::string_view("/\\.`'\"").find(c) == std::string_view::npos;
        if (!ok) {
            char shown[8];
            std::snprintf(shown, sizeof shown, u > 0x20 && u < 0x7f ? "'%c'" : "\\x%02x", u);
            throw ConfigError("database", std::string("invalid character ") + shown +
                                              " (a database name is printable ASCII without / \\ . quotes or spaces)");
        }
    }
    return name;
}

std::string format_host(const std::string& host) {
    return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

}  // namespace

std::chrono::milliseconds parse_duration(std::string_view text, const std::string& part) {
    // <digits>[.<1-9 digits>][ms|s|m]: "250ms", "2s", "1.5s", "0.25m", "1500" (ms). The value must
    // be a whole number of milliseconds ("1.5ms" is refused, never rounded).
    const std::string t(text);
    if (text.empty()) throw ConfigError(part, "empty duration");
    std::size_t digits = 0;
    while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
    if (digits == 0) throw ConfigError(part, "duration must start with a digit: '" + t + "' (e.g. 250ms, 1.5s)");
    const long long max_ms = 24LL * 3600 * 1000;  // a day: anything longer is a typo
    if (digits > 12) throw ConfigError(part, "duration longer than a day: '" + t + "'");
    const long long whole = parse_integer(text.substr(0, digits), part, 0, 999'999'999'999);
    std::size_t pos = digits;
    long long fraction = 0;
    long long fraction_scale = 1;
    if (pos < text.size() && text[pos] == '.') {
        ++pos;
        std::size_t f = 0;
        while (pos + f < text.size() && std::isdigit(static_cast<unsigned char>(text[pos + f]))) ++f;
        if (f == 0) throw ConfigError(part, "a '.' in a duration must be followed by digits: '" + t + "'");
        if (f > 9) throw ConfigError(part, "more than 9 fraction digits in '" + t + "'");
        for (std::size_t i = 0; i < f; ++i) {
            fraction = fraction * 10 + (text[pos + i] - '0');
            fraction_scale *= 10;
        }
        pos += f;
    }
    const std::string_view unit = text.substr(pos);
    long long unit_ms = 0;
    if (unit.empty() || unit == "ms") {
        unit_ms = 1;
    } else if (unit == "s") {
        unit_ms = 1000;
    } else if (unit == "m") {
        unit_ms = 60 * 1000;
    } else {
        throw ConfigError(part, "unknown duration unit '" + std::string(unit) + "' in '" + t + "' (use ms, s or m)");
    }
    if (whole > max_ms) throw ConfigError(part, "duration longer than a day: '" + t + "'");
    // whole <= a day in ms and unit_ms <= 60000: no overflow; fraction < 1e9, same.
    if ((fraction * unit_ms) % fraction_scale != 0) {
        throw ConfigError(part, "'" + t + "' is not a whole number of milliseconds");
    }
    const long long ms = whole * unit_ms + fraction * unit_ms / fraction_scale;
    if (ms > max_ms) throw ConfigError(part, "duration longer than a day: '" + t + "'");
    return std::chrono::milliseconds(ms);
}

namespace {

RedisOptions parse_topology_url(std::string_view url, std::string_view scheme, RedisTopology topology, bool tls);

// "host:port" of an address_map entry.
RedisEndpoint parse_map_endpoint(std::string_view text, const std::string& part) {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos || colon == 0) {
        throw ConfigError(part, "'" + std::string(text) + "' is not host:port");
    }
    RedisEndpoint e;
    e.host = std::string(text.substr(0, colon));
    e.port = static_cast<int>(parse_integer(text.substr(colon + 1), part, 1, 65535));
    return e;
}

// "<host>:<port>=<host>:<port>,...": each announced address and the one to connect to instead.
std::vector<std::pair<RedisEndpoint, RedisEndpoint>> parse_address_map(std::string_view value, const std::string& part) {
    std::vector<std::pair<RedisEndpoint, RedisEndpoint>> map;
    while (!value.empty()) {
        const auto comma = value.find(',');
        const std::string_view entry = value.substr(0, comma);
        value = comma == std::string_view::npos ? std::string_view{} : value.substr(comma + 1);
        if (entry.empty() || (comma != std::string_view::npos && value.empty())) {
            throw ConfigError(part, "empty entry (stray ',')");
        }
        const auto eq = entry.find('=');
        if (eq == std::string_view::npos) {
            throw ConfigError(part, "entry '" + std::string(entry) + "' is not <host>:<port>=<host>:<port>");
        }
        RedisEndpoint from = parse_map_endpoint(entry.substr(0, eq), part);
        RedisEndpoint to = parse_map_endpoint(entry.substr(eq + 1), part);
        for (const auto& [seen, _] : map) {
            if (seen == from) throw ConfigError(part, from.host + ":" + std::to_string(from.port) + " is mapped twice");
        }
        map.emplace_back(std::move(from), std::move(to));
    }
    if (map.empty()) throw ConfigError(part, "empty map");
    return map;
}

// tls_ca, tls_cert, tls_key (file paths), tls_verify (full | ca | none), tls_server_name. Only a
// rediss:// URL takes them: on redis:// they would suggest a protection that is not there.
void parse_tls_parameter(const std::string& key, const std::string& value, RedisTlsOptions& tls) {
    const std::string part = "query parameter '" + key + "'";
    if (!tls.enabled) throw ConfigError(part, "TLS parameters need a rediss:// URL");
    if (value.empty()) throw ConfigError(part, "empty value");
    if (key == "tls_ca") {
        tls.ca_file = value;
    } else if (key == "tls_cert") {
        tls.cert_file = value;
    } else if (key == "tls_key") {
        tls.key_file = value;
    } else if (key == "tls_verify") {
        if (value == "full") {
            tls.verify = RedisTlsVerify::Full;
        } else if (value == "ca") {
            tls.verify = RedisTlsVerify::Ca;
        } else if (value == "none") {
            tls.verify = RedisTlsVerify::None;
        } else {
            throw ConfigError(part, "'" + value + "' is not full, ca or none");
        }
    } else if (key == "tls_server_name") {
        for (char c : value) {
            const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' || c == ':';
            if (!ok) throw ConfigError(part, "invalid character '" + std::string(1, c) + "' in '" + value + "'");
        }
        tls.server_name = value;
    } else {
        throw ConfigError(part, "unknown TLS parameter (known: tls_ca, tls_cert, tls_key, tls_verify, tls_server_name)");
    }
}

}  // namespace

RedisEndpoint mapped_address(const RedisOptions& options, const std::string& host, int port) {
    for (const auto& [from, to] : options.address_map) {
        if (from.port == port && from.host == host) return to;
    }
    return RedisEndpoint{host, port};
}

RedisOptions parse_redis_url(std::string_view url) {
    if (url.substr(0, 16) == "redis+cluster://")
        return parse_topology_url(url, "redis+cluster", RedisTopology::Cluster, false);
    if (url.substr(0, 17) == "redis+sentinel://")
        return parse_topology_url(url, "redis+sentinel", RedisTopology::Sentinel, false);
    // TLS to every node of the topology (docs/tls.md).
    if (url.substr(0, 17) == "rediss+cluster://")
        return parse_topology_url(url, "rediss+cluster", RedisTopology::Cluster, true);
    if (url.substr(0, 18) == "rediss+sentinel://")
        return parse_topology_url(url, "rediss+sentinel", RedisTopology::Sentinel, true);
    const bool tls = url.substr(0, 9) == "rediss://";
    if (auto sep = url.find("://"); sep != std::string_view::npos && url.substr(0, sep) != "redis" && !tls) {
        throw ConfigError("scheme", "expected 'redis', 'rediss', 'redis+cluster', 'rediss+cluster', 'redis+sentinel' "
                                    "or 'rediss+sentinel', got '" +
                                        std::string(url.substr(0, sep)) + "'");
    }
    UrlParts parts = split_url(url, tls ? "rediss" : "redis");
    RedisOptions o;
    o.tls.enabled = tls;
    o.host = parts.host;
    if (parts.port) o.port = *parts.port;
    if (parts.has_userinfo) {
        if (!parts.has_password) {
            // redis://secret@host is ambiguous; Redis URLs put the password after ':'.
            throw ConfigError("password", "write credentials as ':password@' or 'user:password@'");
        }
        o.user = parts.user;
        o.password = parts.password;
        if (o.password.empty()) throw ConfigError("password", "empty password after ':'");
    }
    if (parts.has_path && !parts.path.empty()) {
        o.db = static_cast<int>(parse_integer(parts.path, "database", 0, 1000000));
    }
    for (const auto& [key, value] : parts.query) {
        const std::string part = "query parameter '" + key + "'";
        if (key == "connect_timeout") {
            o.connect_timeout = parse_duration(value, part);
        } else if (key == "socket_timeout") {
            o.socket_timeout = parse_duration(value, part);
        } else if (key == "pool_size") {
            o.pool_size = parse_pool_size(value, part);
        } else if (key == "pool_wait_timeout") {
            o.pool_wait_timeout = parse_duration(value, part);
        } else if (key == "address_map") {
            o.address_map = parse_address_map(value, part);
        } else if (key.starts_with("tls_")) {
            parse_tls_parameter(key, value, o.tls);
        } else {
            throw ConfigError(part, "unknown parameter (known: connect_timeout, socket_timeout, pool_size, "
                                    "pool_wait_timeout, address_map; with rediss://: tls_ca, tls_cert, tls_key, "
                                    "tls_verify, tls_server_name)");
        }
    }
    if (o.connect_timeout.count() == 0) throw ConfigError("query parameter 'connect_timeout'", "must be positive");
    if (o.socket_timeout.count() == 0) throw ConfigError("query parameter 'socket_timeout'", "must be positive");
    if (o.tls.cert_file.empty() != o.tls.key_file.empty()) {
        throw ConfigError(o.tls.cert_file.empty() ? "query parameter 'tls_cert'" : "query parameter 'tls_key'",
                          "a client certificate needs both tls_cert and tls_key");
    }
    return o;
}

namespace {

// redis+cluster://[auth@]host:port,host:port,...[/0][?params]
// redis+sentinel://[auth@]host:port,host:port,.../master-name[?params]
// (rediss+cluster://, rediss+sentinel://: the same over TLS.)
// The node list is split off and each node parsed on its own (errors name "node <i>: host" or
// "node <i>: port"); the rest (credentials, database, parameters) is parsed as a redis:// (or
// rediss://) URL of the first node, so every parameter means what it means there.
RedisOptions parse_topology_url(std::string_view url, std::string_view scheme, RedisTopology topology, bool tls) {
    std::string_view rest = url.substr(scheme.size() + 3);
    const std::size_t end = std::min(rest.find('/'), rest.find('?'));
    std::string_view authority = rest.substr(0, end);
    std::string_view tail = end == std::string_view::npos ? std::string_view{} : rest.substr(end);
    std::string_view userinfo;
    if (auto at = authority.rfind('@'); at != std::string_view::npos) {
        userinfo = authority.substr(0, at + 1);
        authority = authority.substr(at + 1);
    }
    if (authority.empty()) throw ConfigError("nodes", "no host:port listed after '" + std::string(scheme) + "://'");

    std::vector<RedisEndpoint> nodes;
    std::size_t index = 0;
    while (true) {
        const std::size_t comma = authority.find(',');
        std::string_view node = authority.substr(0, comma);
        const std::string part = "node " + std::to_string(index + 1);
        if (node.empty()) throw ConfigError(part, "empty entry in the node list (stray ',')");
        UrlParts parsed;
        try {
            parsed = split_url("redis://" + std::string(node), "redis");
        } catch (const ConfigError& e) {
            throw ConfigError(part + ": " + e.part(), "'" + std::string(node) + "': " + e.what());
        }
        RedisEndpoint endpoint{parsed.host, parsed.port.value_or(topology == RedisTopology::Sentinel ? 26379 : 6379)};
        for (const auto& seen : nodes) {
            if (seen == endpoint) throw ConfigError(part, "'" + std::string(node) + "' is listed twice");
        }
        nodes.push_back(endpoint);
        ++index;
        if (comma == std::string_view::npos) break;
        authority = authority.substr(comma + 1);
        if (authority.empty()) throw ConfigError("node " + std::to_string(index + 1), "empty entry in the node list (stray ',')");
    }

    std::string master;
    if (topology == RedisTopology::Sentinel) {
        // The path is the master's name, not a database number.
        if (tail.empty() || tail.front() != '/') {
            throw ConfigError("master name", "missing '/master-name' after the sentinels");
        }
        const std::size_t q = tail.find('?');
        master = std::string(tail.substr(1, q == std::string_view::npos ? q : q - 1));
        if (master.empty()) throw ConfigError("master name", "empty master name after '/'");
        for (char c : master) {
            bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
            if (!ok) throw ConfigError("master name", "invalid character '" + std::string(1, c) + "' in '" + master + "'");
        }
        tail = q == std::string_view::npos ? std::string_view{} : tail.substr(q);
    }
    const RedisEndpoint& first = nodes.front();
    RedisOptions o = parse_redis_url((tls ? "rediss://" : "redis://") + std::string(userinfo) + format_host(first.host) + ":" +
                                     std::to_string(first.port) + std::string(tail));
    if (topology == RedisTopology::Cluster && o.db != 0) {
        throw ConfigError("database", "Redis Cluster has only database 0, got " + std::to_string(o.db));
    }
    o.topology = topology;
    o.nodes = std::move(nodes);
    o.sentinel_master = std::move(master);
    return o;
}

}  // namespace

namespace {

MysqlTlsMode parse_mysql_tls_mode(const std::string& value, const std::string& part) {
    for (auto mode : {MysqlTlsMode::Disabled, MysqlTlsMode::Required, MysqlTlsMode::VerifyCa,
                      MysqlTlsMode::VerifyIdentity}) {
        if (value == to_string(mode)) return mode;
    }
    throw ConfigError(part, "unknown TLS mode '" + value + "' (known: disabled, required, verify_ca, verify_identity)");
}

// A PEM file path; whether it can be read is checked when a connection opens (db/mysql_tls.h).
std::string tls_file(const std::string& value, const std::string& part) {
    if (value.empty()) throw ConfigError(part, "empty file name");
    return value;
}

}  // namespace

MysqlOptions parse_mysql_url(std::string_view url) {
    UrlParts parts = split_url(url, "mysql");
    MysqlOptions o;
    o.host = parts.host;
    if (parts.port) o.port = *parts.port;
    if (!parts.has_userinfo || parts.user.empty()) throw ConfigError("user", "missing user (mysql://user[:password]@host/db)");
    o.user = parts.user;
    o.password = parts.password;
    if (!parts.has_path || parts.path.empty()) throw ConfigError("database", "missing database name after '/'");
    o.database = database_name(parts.path);
    for (const auto& [key, value] : parts.query) {
        const std::string part = "query parameter '" + key + "'";
        if (key == "connect_timeout") {
            o.connect_timeout = parse_duration(value, part);
        } else if (key == "read_timeout") {
            o.read_timeout = parse_duration(value, part);
        } else if (key == "write_timeout") {
            o.write_timeout = parse_duration(value, part);
        } else if (key == "pool_size") {
            o.pool_size = parse_pool_size(value, part);
        } else if (key == "pool_wait_timeout") {
            o.pool_wait_timeout = parse_duration(value, part);
        } else if (key == "validation_interval") {
            o.validation_interval = parse_duration(value, part);
        } else if (key == "statement_cache_size") {
            o.statement_cache_size = static_cast<std::size_t>(parse_integer(value, part, 0, 10000));
        } else if (key == "tls") {
            o.tls.mode = parse_mysql_tls_mode(value, part);
        } else if (key == "tls_ca") {
            o.tls.ca_file = tls_file(value, part);
        } else if (key == "tls_cert") {
            o.tls.cert_file = tls_file(value, part);
        } else if (key == "tls_key") {
            o.tls.key_file = tls_file(value, part);
        } else {
            throw ConfigError(part, "unknown parameter (known: connect_timeout, read_timeout, write_timeout, pool_size, "
                                    "pool_wait_timeout, validation_interval, statement_cache_size, tls, tls_ca, "
                                    "tls_cert, tls_key)");
        }
    }
    if (o.connect_timeout.count() == 0) throw ConfigError("query parameter 'connect_timeout'", "must be positive");
    // Connector/C++ reads 0 as "no timeout": a query against a hung server would never return.
    if (o.read_timeout.count() == 0) throw ConfigError("query parameter 'read_timeout'", "must be positive");
    if (o.write_timeout.count() == 0) throw ConfigError("query parameter 'write_timeout'", "must be positive");
    return o;
}

std::string to_url(const RedisOptions& o) {
    std::string url = std::string(o.tls.enabled ? "rediss" : "redis") +
                      (o.topology == RedisTopology::Cluster    ? "+cluster://"
                       : o.topology == RedisTopology::Sentinel ? "+sentinel://"
                                                               : "://");
    if (!o.password.empty()) url += percent_encode(o.user) + ":" + percent_encode(o.password) + "@";
    if (o.topology == RedisTopology::Standalone || o.nodes.empty()) {
        url += format_host(o.host) + ":" + std::to_string(o.port);
    } else {
        for (std::size_t i = 0; i < o.nodes.size(); ++i) {
            url += (i ? "," : "") + format_host(o.nodes[i].host) + ":" + std::to_string(o.nodes[i].port);
        }
    }
    url += "/" + (o.topology == RedisTopology::Sentinel ? o.sentinel_master : std::to_string(o.db));
    url += "?connect_timeout=" + format_duration(o.connect_timeout) +
           "&socket_timeout=" + format_duration(o.socket_timeout) +
           "&pool_size=" + std::to_string(o.pool_size) +
           "&pool_wait_timeout=" + format_duration(o.pool_wait_timeout);
    if (o.tls.enabled) {
        if (!o.tls.ca_file.empty()) url += "&tls_ca=" + percent_encode(o.tls.ca_file);
        if (!o.tls.cert_file.empty()) url += "&tls_cert=" + percent_encode(o.tls.cert_file);
        if (!o.tls.key_file.empty()) url += "&tls_key=" + percent_encode(o.tls.key_file);
        url += std::string("&tls_verify=") +
               (o.tls.verify == RedisTlsVerify::Full ? "full" : o.tls.verify == RedisTlsVerify::Ca ? "ca" : "none");
        if (!o.tls.server_name.empty()) url += "&tls_server_name=" + percent_encode(o.tls.server_name);
    }
    if (!o.address_map.empty()) {
        std::string map;
        for (const auto& [from, to] : o.address_map) {
            if (!map.empty()) map += ",";
            map += from.host + ":" + std::to_string(from.port) + "=" + to.host + ":" + std::to_string(to.port);
        }
        url += "&address_map=" + percent_encode(map);
    }
    return url;
}

std::string to_url(const MysqlOptions& o) {
    std::string url = "mysql://" + percent_encode(o.user);
    if (!o.password.empty()) url += ":" + percent_encode(o.password);
    url += "@" + format_host(o.host) + ":" + std::to_string(o.port) + "/" + percent_encode(o.database);
    url += "?connect_timeout=" + format_duration(o.connect_timeout) +
           "&read_timeout=" + format_duration(o.read_timeout) +
           "&write_timeout=" + format_duration(o.write_timeout) +
           "&pool_size=" + std::to_string(o.pool_size) +
           "&pool_wait_timeout=" + format_duration(o.pool_wait_timeout) +
           "&validation_interval=" + format_duration(o.validation_interval) +
           "&statement_cache_size=" + std::to_string(o.statement_cache_size);
    if (o.tls.mode != MysqlTlsMode::Disabled) url += "&tls=" + std::string(to_string(o.tls.mode));
    if (!o.tls.ca_file.empty()) url += "&tls_ca=" + percent_encode(o.tls.ca_file);
    if (!o.tls.cert_file.empty()) url += "&tls_cert=" + percent_encode(o.tls.cert_file);
    if (!o.tls.key_file.empty()) url += "&tls_key=" + percent_encode(o.tls.key_file);
    return url;
}

}  // namespace lockstep
