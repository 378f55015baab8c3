// TlsCertificates: a throw-away certificate authority and the certificates a TLS test needs,
// written as PEM files into a directory, so private redis-server and mariadbd instances can
// speak TLS and a test can present good and bad certificates to the library.
//
//   lockstep::TlsCertificates certs = lockstep::make_tls_certificates(dir);
//   // redis-server --tls-port P --tls-cert-file certs.server_cert --tls-key-file certs.server_key
//   //              --tls-ca-cert-file certs.ca_file
//   // rediss://127.0.0.1:P/?tls_ca=<certs.ca_file>
//
// Made in-process with OpenSSL's libcrypto (P-256 keys, SHA-256 signatures), in a few
// milliseconds, without the openssl command. Every certificate is valid for one day from an hour
// ago, except the expired one. The server certificates name `localhost` and `127.0.0.1`; the
// wrong-host one names only `wrong-host.invalid`; the foreign one is signed by a second CA the
// tests never trust.
//
// Thread safety: make_tls_certificates may be called from any thread; it only writes files.
#pragma once

#include <string>

namespace lockstep {

struct TlsCertificates {
    std::string dir;
    std::string ca_file;                      // the CA certificate (trust this)
    std::string server_cert, server_key;      // localhost / 127.0.0.1, signed by the CA
    std::string client_cert, client_key;      // a client certificate signed by the CA
    std::string expired_cert, expired_key;    // localhost / 127.0.0.1, expired yesterday
    std::string wrong_host_cert, wrong_host_key;  // names only wrong-host.invalid
    std::string foreign_cert, foreign_key;    // localhost / 127.0.0.1, signed by another CA
    std::string foreign_ca_file;              // that other CA (never trusted by default)
};

// Writes every file of TlsCertificates into `dir` (created if missing; files are overwritten).
// Throws ConfigError when a file cannot be written or libcrypto fails.
TlsCertificates make_tls_certificates(const std::string& dir);

}  // namespace lockstep
