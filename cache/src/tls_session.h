// Internal to the cache layer: TLS over one connected, blocking socket (rediss://). hiredis 0.14
// has no TLS, so it keeps connecting the socket and formatting / parsing RESP, while the bytes go
// through this session's SSL object instead of send()/recv() (hiredis_io.h dispatches).
//
// Every read and write, the handshake's included, is bounded by the socket's SO_RCVTIMEO /
// SO_SNDTIMEO (redisSetTimeout). Auto-retry is off, so a read that only processes a TLS record
// without application data (a TLS 1.3 session ticket) returns "nothing yet" instead of blocking
// for the next record: a subscriber woken by poll() for such a record goes back to poll().
//
// The SSL_CTX (CA store, client certificate, verify mode) is built once per RedisClient and
// shared by all its connections (TlsContextShare below); each session has its own SSL object.
//
// Thread safety: TlsSession none; the connection that owns it is used by one thread at a time.
// TlsContextShare: every member may be called from any thread.
#pragma once

#include <memory>
#include <string>
#include <sys/types.h>

#include "lockstep/core/mutex.h"
#include "lockstep/core/redis_options.h"

struct ssl_st;
struct ssl_ctx_st;

namespace lockstep::detail {

// One client's SSL_CTX, shared by every connection of the client (pools of every Cluster node,
// the Sentinel connections, subscribers): the CA file and the client certificate are read once,
// not per connection. Built on first use, so an unreadable file is reported by the connection
// that needed it (a failed build is not kept: the next connection tries again). OpenSSL allows
// SSL_new on a configured SSL_CTX from any thread; each SSL holds a reference to its SSL_CTX.
class TlsContextShare {
public:
    explicit TlsContextShare(const RedisTlsOptions& tls);
    // The context for `tls`, or null when `tls` reads other files or verifies differently from
    // the settings this share was made for (a copy of a client's options changed afterwards):
    // the caller then builds its own. Throws ConfigError as TlsSession's constructor does.
    std::shared_ptr<ssl_ctx_st> context_for(const RedisTlsOptions& tls) EXCLUDES(mutex_);

private:
    const RedisTlsOptions settings_;
    Mutex mutex_;
    std::shared_ptr<ssl_ctx_st> context_ GUARDED_BY(mutex_);
};

// Gives `options` a TlsContextShare when TLS is on and it has none (or one made for other
// settings): RedisClient calls it once, and every copy of its options carries the share.
void share_tls_context(RedisOptions& options);

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
    // ConnectionError naming "TLS handshake" otherwise (e.g. a plain-text server). The SSL_CTX is
    // `options.tls.context_share`'s when set and made for these settings, else its own.
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
    struct SslDeleter {
        void operator()(ssl_st* ssl) const noexcept;
    };
    int fd_;
    std::shared_ptr<ssl_ctx_st> context_;
    std::unique_ptr<ssl_st, SslDeleter> ssl_;
    Failure failure_;
    bool asked_for_certificate_ = false;
};

}  // namespace lockstep::detail
