// How to reach one MySQL/MariaDB server and database. Plain struct with safe defaults;
// `parse_mysql_url` (uri.h) fills one from a mysql:// URL.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace lockstep {

struct MysqlOptions {
    std::string host = "127.0.0.1";
    int port = 3306;
    std::string user = "root";
    std::string password;
    // Default schema; empty means none selected.
    std::string database;
    // Deadline for establishing a connection.
    std::chrono::milliseconds connect_timeout{2000};
    // Deadline for each network read (a query that runs longer fails with a DbError 2013).
    std::chrono::milliseconds read_timeout{30000};
    // Deadline for each network write.
    std::chrono::milliseconds write_timeout{30000};
    // Connections kept by the pool at most; callers beyond this wait.
    std::size_t pool_size = 8;
    // How long a caller waits for a pooled connection before a TimeoutError.
    std::chrono::milliseconds pool_wait_timeout{5000};
    // A pooled connection idle for at least this long is pinged before it is lent (one round
    // trip); one used more recently is trusted. 0 pings on every lend. See docs/db.md.
    std::chrono::milliseconds validation_interval{500};
    // Prepared statements kept open per connection, by SQL text (0 disables the cache: every
    // statement is then prepared, executed and closed, one extra round trip each).
    std::size_t statement_cache_size = 64;
};

}  // namespace lockstep
