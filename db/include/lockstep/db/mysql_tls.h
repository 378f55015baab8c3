// The checks every MySQL connection with TLS passes before it is opened, shared by the pool
// (Connector/C++) and the binlog follower (libmariadb), so both refuse the same options the same
// way. See docs/db.md "TLS".
//
// Thread safety: a free function over a value; it only reads files.
#pragma once

#include "lockstep/core/mysql_options.h"

namespace lockstep {

// Throws ConfigError naming the option ("tls", "tls_ca", "tls_cert" or "tls_key") when:
//   - a file is given with mode Disabled (the connection would silently be plain);
//   - VerifyCa or VerifyIdentity has no ca_file (nothing to verify against: the system trust
//     store is not used);
//   - Required has a ca_file (libmariadb would verify the chain with it: ask for verify_ca);
//   - cert_file is given without key_file, or the reverse;
//   - a file cannot be opened for reading (the message names the path and the reason).
// The contents are read by the TLS library when the connection opens; a file that is not PEM
// fails there, as a DbError / ConnectionError of that connection.
void check_mysql_tls(const MysqlTlsOptions& tls);

}  // namespace lockstep
