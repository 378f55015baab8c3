// Internal to the cache layer: TLS over one connected, blocking socket (rediss://). hiredis 0.14
// has no TLS, so it keeps connecting the socket and formatting / parsing RESP, while the bytes go
// through this session's SSL object instead of send()/recv() (hiredis_io.h dispatches).
//
// Every read and write, the handshake's included, is bounded by the socket's SO_RCVTIMEO /
// SO_SNDTIMEO (redisSetTimeout). Auto-retry is off, so a read that only processes a TLS record
// without application data (a TLS 1.3 session ticket) returns "nothing yet" instead of blocking
// for the next record: a subscriber woken by poll() for such a record goes back to poll().
//
// Thread safety: none; the connection that owns it is used by one thread at a time.
#pragma once

#include <memory>
#include <string>
#include <sys/types.h>

#include "lockstep/core/redis_options.h"

struct ssl_st;
struct ssl_ctx_st;

namespace lockstep::detail {

class TlsSession {
public:
    // How a read or write failed, for the hiredis context's err / errstr.
    struct Failure {
        bool closed = false;   // the server ended the connection (close_notify or EOF)
        int error_number = 0;  // errno of a failed system call (EAGAIN: the socket timeout)
        std::string text;      // otherwise: OpenSSL's reason
    };

    // Handshakes on `fd` (connected, blocking, timeouts set) with `options.tls` against
    // `options.host`. `where` ("redis host:port") starts every message. Throws ConfigError for an
    // unreadable tls_ca / tls_cert / tls_key or a server certificate that fails verification (part
    // "server certificate", the reason from X509_verify_cert_error_string), TimeoutError or
    // ConnectionError naming "TLS handshake" otherwise (e.g. a plain-text server).
    TlsSession(int fd, const RedisOptions& options, const std::string& where);
    ~TlsSession();
    TlsSession(const TlsSession&) = delete;
    TlsSession& operator=(const TlsSession&) = delete;

    // Writes all `n` bytes (one SSL_write; partial writes are off). n, or -1 with failure() set.
    ssize_t write(const char* data, std::size_t n);
    // One SSL_read: the number of bytes read (> 0); 0 when a TLS record without application data
    // was processed (call again, or poll); -1 with failure() set.
    ssize_t read(char* buffer, std::size_t size);
    // Bytes OpenSSL has taken off the socket and not handed out yet (decrypted or not): poll()
    // on the socket cannot see them.
    bool has_buffered_input() const;
    // For an idle pooled connection, without blocking: false when the server closed it or sent
    // application data nobody asked for; true when nothing, or only a TLS 1.3 ticket, arrived.
    bool idle_and_open();
    const Failure& failure() const noexcept { return failure_; }
    // The server asked for a client certificate during the handshake and tls_cert is not set.
    // A server that requires one refuses the client only after the client's handshake is done
    // (TLS 1.3): its alert, or a reset, meets the first command.
    bool asked_for_missing_certificate() const noexcept { return asked_for_certificate_; }

private:
    void record_failure(int result);
    struct ContextDeleter {
        void operator()(ssl_ctx_st* ctx) const noexcept;
    };
    struct SslDeleter {
        void operator()(ssl_st* ssl) const noexcept;
    };
    int fd_;
    std::unique_ptr<ssl_ctx_st, ContextDeleter> context_;
    std::unique_ptr<ssl_st, SslDeleter> ssl_;
    Failure failure_;
    bool asked_for_certificate_ = false;
};

}  // namespace lockstep::detail
