#include "lockstep/cache/redis_connection.h"

#include <sys/socket.h>

#include <cerrno>
#include <string>

#include "hiredis_io.h"
#include "lockstep/core/error.h"
#include "lockstep/core/fault_point.h"
#include "redis_options_check.h"
#include "tls_session.h"

namespace lockstep {

void RedisConnection::ContextDeleter::operator()(redisContext* c) const {
    redisFree(c);
}

RedisConnection::RedisConnection(const RedisOptions& options) : options_(options) {
    detail::check_redis_options(options_);
    const std::string where = "redis " + detail::endpoint(options_.host, options_.port);

    ctx_.reset(redisConnectWithTimeout(options_.host.c_str(), options_.port,
                                       detail::to_timeval(options_.connect_timeout)));
    if (!ctx_ || ctx_->err != 0) {
        broken_ = true;
        detail::throw_failure(ctx_.get(), where + ": connecting (connect_timeout " +
                                              std::to_string(options_.connect_timeout.count()) + "ms)");
    }
    // Bounds every later read and write: a server that accepts but never answers fails a call
    // after socket_timeout instead of hanging it.
    if (redisSetTimeout(ctx_.get(), detail::to_timeval(options_.socket_timeout)) != REDIS_OK) {
        fail("setting the socket timeout");
    }
    // Lets the kernel notice a peer that vanished without closing (idle subscriber connection).
    if (redisEnableKeepAlive(ctx_.get()) != REDIS_OK) fail("enabling TCP keepalive");
    if (options_.tls.enabled) {
        // The handshake is part of connecting: each of its reads and writes is bounded by
        // connect_timeout, then the socket gets socket_timeout back.
        if (redisSetTimeout(ctx_.get(), detail::to_timeval(options_.connect_timeout)) != REDIS_OK) {
            fail("setting the TLS handshake timeout");
        }
        try {
            tls_ = std::make_unique<detail::TlsSession>(ctx_->fd, options_, where);
        } catch (...) {
            broken_ = true;
            throw;
        }
        if (redisSetTimeout(ctx_.get(), detail::to_timeval(options_.socket_timeout)) != REDIS_OK) {
            fail("setting the socket timeout");
        }
    }

    if (!options_.user.empty() || !options_.password.empty()) {
        const RedisReply auth = options_.user.empty() ? command({"AUTH", options_.password})
                                                      : command({"AUTH", options_.user, options_.password});
        if (auth.is_error()) {
            broken_ = true;
            throw ProtocolError(where + ": AUTH" +
                                (options_.user.empty() ? "" : " as '" + options_.user + "'") +
                                " rejected: " + auth.error_message());
        }
    }
    if (options_.db != 0) {
        const std::string db = std::to_string(options_.db);
        const RedisReply select = command({"SELECT", db});
        if (select.is_error()) {
            broken_ = true;
            throw ProtocolError(where + ": SELECT " + db + " rejected: " + select.error_message());
        }
    }
}

RedisConnection::~RedisConnection() = default;

detail::Transport RedisConnection::transport() noexcept {
    return detail::Transport{ctx_.get(), tls_.get()};
}

void RedisConnection::fail(const char* during) {
    broken_ = true;
    const std::string what = "redis " + detail::endpoint(options_.host, options_.port) + ": " + during;
    // A TLS server on a redis:// URL gets plain text where it expects a handshake and resets,
    // closes or answers with a TLS alert: name the likely cause rather than leave a reset or an
    // unparsable byte to be puzzled over. (A server restarted before the first reply looks the
    // same, hence "if".)
    if (!tls_ && !replied_ && detail::looks_like_a_tls_server(ctx_.get())) {
        throw ConnectionError(what + ": " + ctx_->errstr +
                              " before the first reply; a server that expects a TLS handshake does this: if it "
                              "does, use rediss://");
    }
    if (tls_ && !replied_ && tls_->asked_for_missing_certificate()) {
        throw ConnectionError(what + ": " + ctx_->errstr +
                              " before the first reply; the server asked for a client certificate and tls_cert is "
                              "not set: it may require one");
    }
    detail::throw_failure(ctx_.get(), what);
}

RedisReply RedisConnection::command(const std::vector<std::string>& args) {
    detail::Argv argv(args);
    return round_trip(argv);
}

RedisReply RedisConnection::command(std::initializer_list<std::string_view> args) {
    detail::Argv argv(args);
    return round_trip(argv);
}

RedisReply RedisConnection::command(std::span<const std::string_view> args) {
    detail::Argv argv(args);
    return round_trip(argv);
}

void RedisConnection::before_send() {
    try {
        fault::point("redis.before_send");
    } catch (...) {
        // The command is queued in hiredis's output buffer but not sent: reusing the connection
        // would send it with the next caller's command and hand that caller this reply.
        broken_ = true;
        throw;
    }
}

RedisReply RedisConnection::round_trip(detail::Argv& argv) {
    if (argv.size() == 0) throw ConfigError("command", "a Redis command needs at least its name");
    if (broken()) throw ConnectionError("redis: this connection is broken and must not be reused");
    // The name only for a failure's message: building it costs an allocation per command.
    if (redisAppendCommandArgv(ctx_.get(), argv.size(), argv.ptrs(), argv.lens()) != REDIS_OK) {
        fail(("queueing " + argv.name()).c_str());
    }
    // Tests stop here to break the connection between lending and sending (a server restart
    // that looks_alive() could not have seen yet).
    before_send();
    // From the first byte sent on, a failure may leave the command applied: say so, and let
    // the pool discard this connection; it is never re-sent here.
    if (!detail::flush_output(transport())) {
        fail(("sending " + argv.name() + " failed; it may have been applied").c_str());
    }
    detail::ReplyPtr reply = detail::read_reply(transport());
    if (!reply) fail(("no reply to " + argv.name() + " was read; it may have been applied").c_str());
    replied_ = true;
    return detail::to_reply(*reply);
}

void RedisConnection::send(std::initializer_list<std::string_view> args) {
    detail::Argv argv(args);
    if (argv.size() == 0) throw ConfigError("command", "a Redis command needs at least its name");
    if (broken()) throw ConnectionError("redis: this connection is broken and must not be reused");
    if (redisAppendCommandArgv(ctx_.get(), argv.size(), argv.ptrs(), argv.lens()) != REDIS_OK) {
        fail(("queueing " + argv.name()).c_str());
    }
    pending_ = 1;  // out of step until receive() (broken(): the pool will not lend it meanwhile)
    before_send();
    if (!detail::flush_output(transport())) {
        fail(("sending " + argv.name() + " failed; it may have been applied").c_str());
    }
}

RedisReply RedisConnection::receive() {
    if (broken_) throw ConnectionError("redis: this connection is broken and must not be reused");
    detail::ReplyPtr reply = detail::read_reply(transport());
    if (!reply) fail("no reply to a sent command was read; it may have been applied");
    pending_ = 0;
    replied_ = true;
    return detail::to_reply(*reply);
}

std::vector<RedisReply> RedisConnection::pipeline(const std::vector<std::vector<std::string>>& commands) {
    if (commands.empty()) return {};
    send_pipeline(commands);
    return receive_pipeline();
}

void RedisConnection::send_pipeline(const std::vector<std::vector<std::string>>& commands) {
    // Refuse a malformed batch before anything is sent, so it is all-or-nothing on our side.
    if (commands.empty()) throw ConfigError("pipeline", "a pipeline needs at least one command");
    for (const auto& c : commands) {
        if (c.empty()) throw ConfigError("pipeline", "every pipelined command needs at least its name");
    }
    if (broken()) throw ConnectionError("redis: this connection is broken and must not be reused");
    for (const auto& c : commands) {
        detail::Argv argv(c);
        if (redisAppendCommandArgv(ctx_.get(), argv.size(), argv.ptrs(), argv.lens()) != REDIS_OK) {
            fail("queueing a pipeline");
        }
    }
    // From here until receive_pipeline() has read every reply the connection is out of step (broken()).
    pending_ = commands.size();
    before_send();
    if (!detail::flush_output(transport())) {
        fail(("sending a pipeline of " + std::to_string(pending_) + " commands failed; some may have been applied")
                 .c_str());
    }
}

std::vector<RedisReply> RedisConnection::receive_pipeline() {
    std::vector<RedisReply> replies;
    const std::size_t count = pending_;
    replies.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
        detail::ReplyPtr reply = detail::read_reply(transport());
        if (!reply) {
            fail(("pipeline broke after " + std::to_string(i) + " of " + std::to_string(count) +
                  " replies; the remaining commands may have been applied")
                     .c_str());
        }
        replies.push_back(detail::to_reply(*reply));
        --pending_;
        replied_ = true;
    }
    return replies;
}

bool RedisConnection::in_step() const noexcept {
    if (broken() || !ctx_ || ctx_->err != 0) return false;
    // Bytes hiredis read past the last reply would be the next caller's "reply"; over TLS, so
    // would bytes OpenSSL decrypted and nobody read.
    if (tls_ && tls_->has_buffered_input()) return false;
    return ctx_->reader == nullptr || ctx_->reader->pos >= ctx_->reader->len;
}

bool RedisConnection::looks_alive() const {
    if (!in_step()) return false;
    // A TLS 1.3 server sends session tickets after the handshake: bytes that are no reply.
    if (tls_) return tls_->idle_and_open();
    // An idle connection has nothing to read. EOF means the server closed it (restart, timeout,
    // CLIENT KILL); bytes mean the stream is out of step. Either way it must not be lent.
    char byte;
    for (;;) {
        const ssize_t n = ::recv(ctx_->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
        return false;
    }
}

int RedisConnection::fd() const {
    return ctx_ ? ctx_->fd : -1;
}

}  // namespace lockstep
