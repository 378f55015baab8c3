// Internal to the cache layer: the few places where lockstep touches hiredis's buffers and
// error fields. Shared by RedisConnection (request/reply) and RedisSubscriber (push stream).
#pragma once

// hiredis 0.14's hiredis.h includes sds.h outside its extern "C" block, so a C++ caller of the
// sds functions (flush_output uses them) would look for C++ symbols. Include it as C first; its
// include guard makes hiredis.h's own include a no-op. Include hiredis only through this header.
extern "C" {
#include <hiredis/sds.h>
}
#include <hiredis/hiredis.h>

#include <chrono>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/cache/redis_reply.h"

namespace lockstep::detail {

struct ReplyDeleter {
    void operator()(redisReply* r) const noexcept {
        if (r != nullptr) freeReplyObject(r);
    }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

// argv/argvlen for redisAppendCommandArgv, pointing into the caller's strings (binary-safe:
// lengths are explicit, NUL bytes are data). The strings must outlive the Argv.
class Argv {
public:
    explicit Argv(const std::vector<std::string>& args);
    explicit Argv(std::initializer_list<std::string_view> args);
    explicit Argv(std::span<const std::string_view> args);
    int size() const noexcept { return static_cast<int>(ptrs_.size()); }
    const char** ptrs() noexcept { return ptrs_.data(); }
    const std::size_t* lens() const noexcept { return lens_.data(); }
    // The command name, printable, for error messages (never the arguments: they are data).
    std::string name() const;

private:
    std::vector<const char*> ptrs_;
    std::vector<std::size_t> lens_;
};

// Deep copy of a hiredis reply into a RedisReply.
RedisReply to_reply(const redisReply& r);

class TlsSession;

// Where a connection's bytes go: hiredis formats commands into context->obuf and parses replies
// from context->reader, and these functions move the bytes, over the plain socket or, when `tls`
// is set, through its SSL object (rediss://). The one place that knows which.
struct Transport {
    redisContext* context = nullptr;
    TlsSession* tls = nullptr;  // null: plain TCP
};

// Sends everything queued in c->obuf with send(MSG_NOSIGNAL) (or SSL_write). hiredis 0.14
// writes with write(2), which raises SIGPIPE (fatal by default) on a connection the server has
// closed; a library must not kill its process for that. On failure sets c->err / c->errstr the
// way hiredis does and returns false. Each send is bounded by SO_SNDTIMEO (redisSetTimeout).
bool flush_output(const Transport& t);

// Blocks until one complete reply is parsed; each read is bounded by SO_RCVTIMEO. nullptr with
// c->err set on failure.
ReplyPtr read_reply(const Transport& t);

// One read from the socket into hiredis's reader (what redisBufferRead does; over TLS possibly
// no bytes, when only a session ticket arrived). false with c->err set on failure.
bool read_input(const Transport& t);

// True when bytes are already received but invisible to poll() on the socket (decrypted TLS
// data held by OpenSSL): a poll-driven reader must read before it polls again.
bool has_buffered_input(const Transport& t);

// True when the failure recorded on `c` was a deadline: connect timeout, or SO_RCVTIMEO /
// SO_SNDTIMEO expiring (hiredis 0.14 reports those as an I/O error with EAGAIN's text).
bool failed_by_timeout(const redisContext* c);

// Throws the typed error for the failure recorded on `c`: TimeoutError for a deadline,
// ProtocolError for an unparsable stream, ConnectionError otherwise. `what` says what was going
// on, e.g. "redis 127.0.0.1:6379: reading the reply to GET".
[[noreturn]] void throw_failure(const redisContext* c, const std::string& what);

// True when the failure recorded on a plain connection is what a TLS server does to a client
// that does not start a TLS handshake: it resets or closes the connection, or answers with a TLS
// record (an alert, 0x15, or a handshake, 0x16) that hiredis cannot parse. Only meaningful
// before the connection's first reply.
bool looks_like_a_tls_server(const redisContext* c);

timeval to_timeval(std::chrono::milliseconds ms) noexcept;

// "host:port" for messages.
std::string endpoint(std::string_view host, int port);

// Bytes made safe for a log line or an exception message: non-printables escaped, cut at `max`.
std::string printable(std::string_view bytes, std::size_t max = 64);

}  // namespace lockstep::detail
