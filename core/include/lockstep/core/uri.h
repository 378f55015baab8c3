// Parsing of the two URL forms lockstep accepts. Every malformed part raises a ConfigError whose
// `part()` names it ("scheme", "host", "port", "database", "query parameter 'pool_size'", ...).
//
//   redis://[[user]:password@]host[:port][/db][?param=value&...]
//   rediss://...  the same over TLS (docs/tls.md)
//   mysql://user[:password]@host[:port]/database[?param=value&...]
//
// Durations are written with a unit: 500ms, 2s, 1.5s, 0.25m, 1m (a bare number is milliseconds);
// a fraction is allowed when the value is a whole number of milliseconds ("1.5ms": ConfigError).
// redis params: connect_timeout, socket_timeout, pool_size, pool_wait_timeout; rediss:// adds
//               tls_ca, tls_cert, tls_key (files), tls_verify (full|ca|none), tls_server_name
// mysql params: connect_timeout, read_timeout, write_timeout, pool_size, pool_wait_timeout,
//               validation_interval, statement_cache_size,
//               tls (disabled|required|verify_ca|verify_identity), tls_ca, tls_cert, tls_key (files)
// Timeouts must be positive: a zero timeout would mean "wait forever" to the drivers.
// User names, passwords and the mysql database name may be percent-encoded (%40 for '@',
// shop%2Deu for shop-eu); a database name decodes to 1-64 printable ASCII characters without
// / \ . quotes, backticks or spaces. IPv6 hosts go in brackets.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "lockstep/core/mysql_options.h"
#include "lockstep/core/redis_options.h"

namespace lockstep {

RedisOptions parse_redis_url(std::string_view url);
MysqlOptions parse_mysql_url(std::string_view url);

// The inverse: a URL that parses back to the same options (the password is included).
std::string to_url(const RedisOptions& o);
std::string to_url(const MysqlOptions& o);

// "250ms", "2s", "1.5s", "1m", "1500" (ms). `part` names the caller's option in the error.
std::chrono::milliseconds parse_duration(std::string_view text, const std::string& part);

}  // namespace lockstep
