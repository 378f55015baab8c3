#include "tls_session.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>

#include <cerrno>
#include <climits>

#include "lockstep/core/error.h"

namespace lockstep::detail {
namespace {

// The reason of the oldest queued OpenSSL error ("wrong version number", "no such file"), or
// `fallback`. Reasons name files and protocol states, never key material.
std::string openssl_reason(const char* fallback) {
    const unsigned long e = ERR_peek_error();
    const char* reason = e != 0 ? ERR_reason_error_string(e) : nullptr;
    std::string text = reason != nullptr ? reason : fallback;
    ERR_clear_error();
    return text;
}

bool is_ip_address(const std::string& host) {
    in6_addr buffer{};
    return ::inet_pton(AF_INET, host.c_str(), &buffer) == 1 || ::inet_pton(AF_INET6, host.c_str(), &buffer) == 1;
}

// A key file with a passphrase would make OpenSSL prompt on the terminal; a library must fail.
int refuse_passphrase(char*, int, int, void*) {
    return 0;
}

// Called by OpenSSL when the server asks for a client certificate and none is configured: note
// it, answer with none.
int note_certificate_request(SSL* ssl, X509**, EVP_PKEY**) {
    if (auto* asked = static_cast<bool*>(SSL_get_app_data(ssl))) *asked = true;
    return 0;
}

void load_files(SSL_CTX* ctx, const RedisTlsOptions& tls) {
    if (!tls.ca_file.empty()) {
        if (SSL_CTX_load_verify_locations(ctx, tls.ca_file.c_str(), nullptr) != 1) {
            throw ConfigError("tls_ca", "cannot load CA certificates from '" + tls.ca_file +
                                            "': " + openssl_reason("unreadable"));
        }
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
        throw ConfigError("tls_ca", "cannot load the system's CA store: " + openssl_reason("unreadable"));
    }
    if (tls.cert_file.empty() != tls.key_file.empty()) {
        throw ConfigError(tls.cert_file.empty() ? "tls_cert" : "tls_key",
                          "a client certificate needs both tls_cert and tls_key");
    }
    if (tls.cert_file.empty()) return;
    SSL_CTX_set_default_passwd_cb(ctx, refuse_passphrase);
    if (SSL_CTX_use_certificate_chain_file(ctx, tls.cert_file.c_str()) != 1) {
        throw ConfigError("tls_cert", "cannot load the client certificate from '" + tls.cert_file +
                                          "': " + openssl_reason("unreadable"));
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
        throw ConfigError("tls_key", "cannot load the private key from '" + tls.key_file +
                                         "' (unreadable, not PEM, or protected by a passphrase): " +
                                         openssl_reason("unreadable"));
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        throw ConfigError("tls_key", "'" + tls.key_file + "' is not the key of '" + tls.cert_file + "'");
    }
}

// A configured client SSL_CTX for `tls`: TLS 1.2 at least, the CA store, the client
// certificate, the verify mode. Throws ConfigError for unreadable files.
std::shared_ptr<ssl_ctx_st> make_context(const RedisTlsOptions& tls, const std::string& where) {
    ERR_clear_error();
    std::shared_ptr<ssl_ctx_st> context(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
    if (!context) throw ConnectionError(where + ": TLS handshake: " + openssl_reason("SSL_CTX_new failed"));
    SSL_CTX_set_min_proto_version(context.get(), TLS1_2_VERSION);
    load_files(context.get(), tls);
    SSL_CTX_set_verify(context.get(), tls.verify == RedisTlsVerify::None ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, nullptr);
    SSL_CTX_set_client_cert_cb(context.get(), note_certificate_request);
    return context;
}

// What the SSL_CTX is made of (server_name is per connection, set on the SSL).
bool same_context_settings(const RedisTlsOptions& a, const RedisTlsOptions& b) {
    return a.ca_file == b.ca_file && a.cert_file == b.cert_file && a.key_file == b.key_file && a.verify == b.verify;
}

}  // namespace

namespace {
RedisTlsOptions without_share(RedisTlsOptions tls) {
    tls.context_share.reset();  // a share must not own itself through its settings
    return tls;
}
}  // namespace

TlsContextShare::TlsContextShare(const RedisTlsOptions& tls) : settings_(without_share(tls)) {}

std::shared_ptr<ssl_ctx_st> TlsContextShare::context_for(const RedisTlsOptions& tls) {
    if (!same_context_settings(tls, settings_)) return nullptr;
    MutexLock lock(mutex_);
    if (!context_) context_ = make_context(settings_, "redis");
    return context_;
}

void share_tls_context(RedisOptions& options) {
    if (!options.tls.enabled) return;
    // A copy of another client's options keeps that client's share only for the same files.
    options.tls.context_share = std::make_shared<TlsContextShare>(options.tls);
}

void TlsSession::SslDeleter::operator()(ssl_st* ssl) const noexcept {
    SSL_free(ssl);
}

TlsSession::TlsSession(int fd, const RedisOptions& options, const std::string& where) : fd_(fd) {
    const RedisTlsOptions& tls = options.tls;
    if (tls.context_share) context_ = tls.context_share->context_for(tls);
    if (!context_) context_ = make_context(tls, where);

    ERR_clear_error();
    ssl_.reset(SSL_new(context_.get()));
    if (!ssl_ || SSL_set_fd(ssl_.get(), fd) != 1) {
        throw ConnectionError(where + ": TLS handshake: " + openssl_reason("SSL_new failed"));
    }
    SSL_set_app_data(ssl_.get(), &asked_for_certificate_);
    // See the header: a ticket must not make a read block for the next record.
    SSL_clear_mode(ssl_.get(), SSL_MODE_AUTO_RETRY);
    // One recv takes every record that has arrived (a pipeline's replies, a burst of pub/sub
    // messages), not one record per system call; what it took beyond the first record is what
    // has_buffered_input() reports to the pollers.
    SSL_set_read_ahead(ssl_.get(), 1);
    const std::string& name = tls.server_name.empty() ? options.host : tls.server_name;
    const bool ip = is_ip_address(name);
    // SNI carries names only (RFC 6066); an address is checked, not sent.
    if (!ip) SSL_set_tlsext_host_name(ssl_.get(), name.c_str());
    if (tls.verify == RedisTlsVerify::Full) {
        X509_VERIFY_PARAM* param = SSL_get0_param(ssl_.get());
        X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        const int set = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str())
                           : X509_VERIFY_PARAM_set1_host(param, name.c_str(), 0);
        if (set != 1) throw ConfigError("tls_server_name", "'" + name + "' cannot be checked against a certificate");
    }

    int result = 0;
    do {
        errno = 0;
        result = SSL_connect(ssl_.get());
    } while (result <= 0 && SSL_get_error(ssl_.get(), result) == SSL_ERROR_SYSCALL && errno == EINTR);
    if (result == 1) return;

    const long verified = SSL_get_verify_result(ssl_.get());
    if (tls.verify != RedisTlsVerify::None && verified != X509_V_OK) {
        ERR_clear_error();
        throw ConfigError("server certificate",
                          where + ": TLS handshake: the server's certificate failed verification: " +
                              X509_verify_cert_error_string(verified));
    }
    record_failure(result);
    if (failure_.error_number == EAGAIN || failure_.error_number == EWOULDBLOCK) {
        throw TimeoutError(where + ": TLS handshake timed out (connect_timeout " +
                           std::to_string(options.connect_timeout.count()) +
                           "ms): no TLS answer; is the server speaking TLS on this port?");
    }
    const std::string detail = failure_.closed ? "the server closed the connection" : failure_.text;
    throw ConnectionError(where + ": TLS handshake failed: " + detail + " (is the server speaking TLS on this port?)");
}

TlsSession::~TlsSession() {
    // No close_notify: the socket is closed right after, and a blocking SSL_shutdown against a
    // dead server would wait out the socket timeout in a destructor.
}

void TlsSession::record_failure(int result) {
    const int saved_errno = errno;
    const int error = SSL_get_error(ssl_.get(), result);
    failure_ = Failure{};
    switch (error) {
        case SSL_ERROR_ZERO_RETURN:
            failure_.closed = true;
            break;
        case SSL_ERROR_WANT_READ:
        case SSL_ERROR_WANT_WRITE:
            // A blocking socket wants more only when SO_RCVTIMEO / SO_SNDTIMEO expired.
            failure_.error_number = EAGAIN;
            break;
        case SSL_ERROR_SYSCALL:
            if (ERR_peek_error() == 0) {
                if (saved_errno == 0) {
                    failure_.closed = true;  // EOF without close_notify
                } else {
                    failure_.error_number = saved_errno;
                }
                break;
            }
            [[fallthrough]];
        default: {
            const unsigned long e = ERR_peek_error();
            if (ERR_GET_LIB(e) == ERR_LIB_SSL && ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
                ERR_clear_error();
                failure_.closed = true;
            } else {
                failure_.text = "TLS: " + openssl_reason("TLS error");
            }
        }
    }
    ERR_clear_error();
}

ssize_t TlsSession::write(const char* data, std::size_t n) {
    const int size = n > static_cast<std::size_t>(INT_MAX) ? INT_MAX : static_cast<int>(n);
    for (;;) {
        ERR_clear_error();
        errno = 0;
        const int result = SSL_write(ssl_.get(), data, size);
        if (result > 0) return result;
        if (SSL_get_error(ssl_.get(), result) == SSL_ERROR_SYSCALL && errno == EINTR) continue;
        record_failure(result);
        return -1;
    }
}

ssize_t TlsSession::read(char* buffer, std::size_t size) {
    const int capacity = size > static_cast<std::size_t>(INT_MAX) ? INT_MAX : static_cast<int>(size);
    for (;;) {
        ERR_clear_error();
        errno = 0;
        const int result = SSL_read(ssl_.get(), buffer, capacity);
        if (result > 0) return result;
        const int error = SSL_get_error(ssl_.get(), result);
        if (error == SSL_ERROR_SYSCALL && errno == EINTR) continue;
        // Auto-retry off: a record without application data was processed, and the socket's
        // read did not time out (that leaves EAGAIN in errno).
        if (error == SSL_ERROR_WANT_READ && errno != EAGAIN && errno != EWOULDBLOCK) return 0;
        record_failure(result);
        return -1;
    }
}

bool TlsSession::has_buffered_input() const {
    // SSL_has_pending, not SSL_pending: OpenSSL may have read further records off the socket
    // than the one it decrypted (several small replies in one segment), and those too are gone
    // from poll()'s view.
    return SSL_has_pending(ssl_.get()) == 1;
}

bool TlsSession::idle_and_open() {
    if (has_buffered_input()) return false;
    char byte;
    for (;;) {
        const ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
        if (n == 0) return false;
        break;
    }
    // A record is waiting: a ticket is harmless, application data or an alert is not. Read it
    // without blocking, so a partial record cannot hold the caller for the socket timeout.
    const int flags = ::fcntl(fd_, F_GETFL, 0);
    if (flags < 0 || ::fcntl(fd_, F_SETFL, flags | O_NONBLOCK) < 0) return false;
    char buffer[64];
    const ssize_t n = read(buffer, sizeof buffer);
    const bool restored = ::fcntl(fd_, F_SETFL, flags) == 0;
    // n == -1 with EAGAIN: a partial record, read on when the connection is next used.
    const bool waiting = n < 0 && failure_.error_number == EAGAIN && !failure_.closed;
    return restored && (n == 0 || waiting) && !has_buffered_input();
}

}  // namespace lockstep::detail
