// One blocking hiredis connection, plain or TLS (rediss://, docs/tls.md). Owned by
// RedisConnectionPool; callers reach it through a PooledRedisConnection guard
// (redis_connection_pool.h).
//
// Failure rule: if an I/O error or timeout happens after a command was written, the
// connection is marked broken and a ConnectionError (or TimeoutError) is thrown saying the
// command may have been applied. It is never re-sent by lockstep. A broken connection is
// replaced by the pool, not reused.
//
// Thread safety: none; one thread at a time (the pool guarantees it).
#pragma once

#include <chrono>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/cache/redis_reply.h"
#include "lockstep/core/redis_options.h"

struct redisContext;

namespace lockstep {

namespace detail {
class Argv;
class TlsSession;
struct Transport;
}  // namespace detail

class RedisConnection {
public:
    // Connects, then AUTH and SELECT per options. Throws ConnectionError / TimeoutError /
    // ProtocolError (bad credentials).
    explicit RedisConnection(const RedisOptions& options);
    ~RedisConnection();
    RedisConnection(const RedisConnection&) = delete;
    RedisConnection& operator=(const RedisConnection&) = delete;

    // One command; an error reply is returned as a RedisReply of type Error (not thrown).
    RedisReply command(const std::vector<std::string>& args);
    // Same, without copying the arguments.
    RedisReply command(std::initializer_list<std::string_view> args);
    RedisReply command(std::span<const std::string_view> args);
    // One command sent without reading its reply, so the caller can overlap the round trip with
    // other work (DelayedDoubleDelete's first DEL runs beside the UPDATE); receive() reads the
    // reply. Until then the connection counts as broken(): a guard dropped without receive()
    // makes the pool discard it instead of lending it out with a reply that belongs to nobody.
    void send(std::initializer_list<std::string_view> args);
    RedisReply receive();
    // Writes all commands, then reads all replies: one round trip. Error replies are returned.
    std::vector<RedisReply> pipeline(const std::vector<std::vector<std::string>>& commands);
    // pipeline() in two halves, so that one thread keeps requests in flight on several servers
    // at once (Redlock's parallel fan-out): send_pipeline() writes the commands and returns without
    // reading, receive_pipeline() reads their replies. Between the two the connection counts as
    // broken(): a guard dropped before receive_pipeline() discards it instead of lending it out of step.
    void send_pipeline(const std::vector<std::vector<std::string>>& commands);
    std::vector<RedisReply> receive_pipeline();

    // True once an I/O error happened; the pool discards it.
    bool broken() const noexcept { return broken_ || pending_ > 0; }
    // Liveness check without a round trip, one non-blocking recv(MSG_PEEK): false if the peer
    // has closed the socket (e.g. the server restarted while this connection sat idle in the
    // pool) or sent bytes nobody asked for. The pool runs it on connections idle longer than
    // pool_check_idle_after only (redis_connection_pool.h).
    bool looks_alive() const;
    // What can be known without a system call: not broken, no error on the context, and no
    // reply bytes left over in hiredis's read buffer.
    bool in_step() const noexcept;
    // When the pool last took this connection back (steady clock).
    std::chrono::steady_clock::time_point idle_since() const noexcept { return idle_since_; }
    void mark_idle(std::chrono::steady_clock::time_point now) noexcept { idle_since_ = now; }
    // The socket file descriptor, for poll() by the subscriber.
    int fd() const;
    // The hiredis context. On a TLS connection (rediss://) its socket carries TLS records: a
    // caller must move bytes through transport() (cache/src/hiredis_io.h), never read or write
    // the socket itself.
    redisContext* raw() noexcept { return ctx_.get(); }
    // The context and, over TLS, the session its bytes go through (library-internal use).
    detail::Transport transport() noexcept;

private:
    struct ContextDeleter {
        void operator()(redisContext* c) const;
    };
    [[noreturn]] void fail(const char* during);
    RedisReply round_trip(detail::Argv& argv);
    // The fault point "redis.before_send"; an error armed there marks the connection broken.
    void before_send();
    std::unique_ptr<redisContext, ContextDeleter> ctx_;
    // Declared after ctx_ so that it is destroyed first, while the socket is still open.
    std::unique_ptr<detail::TlsSession> tls_;
    RedisOptions options_;
    bool broken_ = false;
    std::size_t pending_ = 0;  // replies sent for and not yet read (send / receive)
    bool replied_ = false;     // a reply was read (a failure before it may be a TLS server)
    std::chrono::steady_clock::time_point idle_since_{};
};

}  // namespace lockstep
