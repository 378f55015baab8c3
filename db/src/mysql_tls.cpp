#include "lockstep/db/mysql_tls.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "lockstep/core/error.h"

namespace lockstep {
namespace {

void require_readable(const std::string& path, const char* option) {
    // fopen, not access(): it answers for this process's effective ids, as the TLS library will.
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw ConfigError(option, "cannot read '" + path + "': " + std::strerror(errno));
    std::fclose(f);
}

}  // namespace

void check_mysql_tls(const MysqlTlsOptions& tls) {
    const bool any_file = !tls.ca_file.empty() || !tls.cert_file.empty() || !tls.key_file.empty();
    if (tls.mode == MysqlTlsMode::Disabled) {
        if (any_file) {
            throw ConfigError("tls", "tls_ca, tls_cert and tls_key need tls=required, verify_ca or verify_identity "
                                     "(TLS is disabled: the connection would be plain text)");
        }
        return;
    }
    const bool verifies = tls.mode == MysqlTlsMode::VerifyCa || tls.mode == MysqlTlsMode::VerifyIdentity;
    if (verifies && tls.ca_file.empty()) {
        throw ConfigError("tls_ca", "tls=" + std::string(to_string(tls.mode)) +
                                        " needs the CA certificate file that signed the server's certificate");
    }
    if (!verifies && !tls.ca_file.empty()) {
        throw ConfigError("tls_ca", "tls=required verifies nothing; to check the server against this CA use "
                                    "tls=verify_ca or tls=verify_identity");
    }
    if (tls.cert_file.empty() != tls.key_file.empty()) {
        throw ConfigError(tls.cert_file.empty() ? "tls_cert" : "tls_key",
                          "a client certificate needs both tls_cert and tls_key");
    }
    if (!tls.ca_file.empty()) require_readable(tls.ca_file, "tls_ca");
    if (!tls.cert_file.empty()) require_readable(tls.cert_file, "tls_cert");
    if (!tls.key_file.empty()) require_readable(tls.key_file, "tls_key");
}

}  // namespace lockstep
