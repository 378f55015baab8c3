// How to reach one MySQL/MariaDB server and database. Plain struct with safe defaults;
// `parse_mysql_url` (uri.h) fills one from a mysql:// URL. Thread safety: a plain value.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

namespace lockstep {

// What a connection's TLS proves. Each mode includes the ones before it.
enum class MysqlTlsMode {
    Disabled,        // plain TCP (the default)
    Required,        // encrypted; the server's certificate is not checked
    VerifyCa,        // encrypted; the certificate chains to `ca_file` (any host name)
    VerifyIdentity,  // VerifyCa, and the certificate names the host connected to
};

// The URL spelling: "disabled", "required", "verify_ca", "verify_identity".
constexpr std::string_view to_string(MysqlTlsMode mode) noexcept {
    switch (mode) {
        case MysqlTlsMode::Required: return "required";
        case MysqlTlsMode::VerifyCa: return "verify_ca";
        case MysqlTlsMode::VerifyIdentity: return "verify_identity";
        case MysqlTlsMode::Disabled: break;
    }
    return "disabled";
}

// TLS of a MySQL connection (URL: tls, tls_ca, tls_cert, tls_key). The files are PEM paths,
// read when a connection opens; db/mysql_tls.h states which combinations are accepted.
struct MysqlTlsOptions {
    MysqlTlsMode mode = MysqlTlsMode::Disabled;
    // The CA certificate(s) the server's certificate must chain to. Needed by VerifyCa and
    // VerifyIdentity; refused with Required (which verifies nothing).
    std::string ca_file;
    // A client certificate and its key, for accounts created REQUIRE X509 / SUBJECT; both or
    // neither.
    std::string cert_file;
    std::string key_file;
};

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
    // TLS; off unless asked for. See docs/db.md "TLS".
    MysqlTlsOptions tls;
};

}  // namespace lockstep
