#include "hiredis_io.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <system_error>

#include "lockstep/core/error.h"
#include "tls_session.h"

namespace lockstep::detail {

Argv::Argv(const std::vector<std::string>& args) {
    ptrs_.reserve(args.size());
    lens_.reserve(args.size());
    for (const auto& a : args) {
        ptrs_.push_back(a.data());
        lens_.push_back(a.size());
    }
}

Argv::Argv(std::initializer_list<std::string_view> args) {
    ptrs_.reserve(args.size());
    lens_.reserve(args.size());
    for (const auto& a : args) {
        ptrs_.push_back(a.data());
        lens_.push_back(a.size());
    }
}

Argv::Argv(std::span<const std::string_view> args) {
    ptrs_.reserve(args.size());
    lens_.reserve(args.size());
    for (const auto& a : args) {
        ptrs_.push_back(a.data());
        lens_.push_back(a.size());
    }
}

std::string Argv::name() const {
    if (ptrs_.empty()) return "(empty command)";
    return printable(std::string_view(ptrs_[0], lens_[0]), 32);
}

RedisReply to_reply(const redisReply& r) {
    switch (r.type) {
        case REDIS_REPLY_STRING:
            return RedisReply::string(std::string(r.str, r.len));
        case REDIS_REPLY_STATUS:
            return RedisReply::status(std::string(r.str, r.len));
        case REDIS_REPLY_ERROR:
            return RedisReply::error(std::string(r.str, r.len));
        case REDIS_REPLY_INTEGER:
            return RedisReply::integer(r.integer);
        case REDIS_REPLY_NIL:
            return RedisReply::nil();
        case REDIS_REPLY_ARRAY: {
            std::vector<RedisReply> elements;
            elements.reserve(r.elements);
            for (std::size_t i = 0; i < r.elements; ++i) {
                if (r.element[i] == nullptr) {
                    elements.push_back(RedisReply::nil());
                } else {
                    elements.push_back(to_reply(*r.element[i]));
                }
            }
            return RedisReply::array(std::move(elements));
        }
        default:
            throw ProtocolError("hiredis returned a reply of unknown type " + std::to_string(r.type));
    }
}

namespace {

void set_io_error(redisContext* c, int error_number) {
    c->err = REDIS_ERR_IO;
    const std::string text = std::generic_category().message(error_number);
    std::snprintf(c->errstr, sizeof(c->errstr), "%s", text.c_str());
}

bool errstr_is(const redisContext* c, int error_number) {
    // std::generic_category().message gives the same text as strerror_r, which hiredis uses.
    static const std::string eagain = std::generic_category().message(EAGAIN);
    static const std::string etimedout = std::generic_category().message(ETIMEDOUT);
    const std::string& text = error_number == EAGAIN ? eagain : etimedout;
    return std::strstr(c->errstr, text.c_str()) != nullptr;
}

// A TLS read or write failed: record it on the context the way hiredis records a socket's.
void set_tls_error(redisContext* c, const TlsSession::Failure& failure) {
    if (failure.closed) {
        c->err = REDIS_ERR_EOF;
        std::snprintf(c->errstr, sizeof(c->errstr), "%s", "Server closed the connection");
    } else if (failure.error_number != 0) {
        set_io_error(c, failure.error_number);
    } else {
        c->err = REDIS_ERR_IO;
        std::snprintf(c->errstr, sizeof(c->errstr), "%s", failure.text.c_str());
    }
}

}  // namespace

bool flush_output(const Transport& t) {
    redisContext* c = t.context;
    if (c->err != 0) return false;
    while (sdslen(c->obuf) > 0) {
        ssize_t n = 0;
        if (t.tls != nullptr) {
            n = t.tls->write(c->obuf, sdslen(c->obuf));
            if (n < 0) {
                set_tls_error(c, t.tls->failure());
                return false;
            }
        } else {
            n = ::send(c->fd, c->obuf, sdslen(c->obuf), MSG_NOSIGNAL);
        }
        if (n < 0) {
            if (errno == EINTR) continue;
            set_io_error(c, errno);
            return false;
        }
        // Same bookkeeping as hiredis's redisBufferWrite.
        if (static_cast<std::size_t>(n) == sdslen(c->obuf)) {
            sdsfree(c->obuf);
            c->obuf = sdsempty();
        } else {
            sdsrange(c->obuf, n, -1);
        }
    }
    return true;
}

bool read_input(const Transport& t) {
    redisContext* c = t.context;
    if (t.tls == nullptr) return redisBufferRead(c) == REDIS_OK;
    if (c->err != 0) return false;
    char buffer[16 * 1024];  // hiredis reads in the same size
    const ssize_t n = t.tls->read(buffer, sizeof buffer);
    if (n < 0) {
        set_tls_error(c, t.tls->failure());
        return false;
    }
    if (n > 0 && redisReaderFeed(c->reader, buffer, static_cast<std::size_t>(n)) != REDIS_OK) {
        c->err = c->reader->err;
        std::snprintf(c->errstr, sizeof(c->errstr), "%s", c->reader->errstr);
        return false;
    }
    return true;
}

bool has_buffered_input(const Transport& t) {
    return t.tls != nullptr && t.tls->has_buffered_input();
}

ReplyPtr read_reply(const Transport& t) {
    redisContext* c = t.context;
    void* raw = nullptr;
    if (redisGetReplyFromReader(c, &raw) != REDIS_OK) return nullptr;
    while (raw == nullptr) {
        if (!read_input(t)) return nullptr;
        if (redisGetReplyFromReader(c, &raw) != REDIS_OK) return nullptr;
    }
    return ReplyPtr(static_cast<redisReply*>(raw));
}

bool failed_by_timeout(const redisContext* c) {
    return c->err == REDIS_ERR_IO && (errstr_is(c, EAGAIN) || errstr_is(c, ETIMEDOUT));
}

void throw_failure(const redisContext* c, const std::string& what) {
    if (c == nullptr) throw ConnectionError(what + ": out of memory allocating a hiredis context");
    const std::string detail = c->errstr[0] != '\0' ? std::string(c->errstr) : "unknown error";
    if (failed_by_timeout(c)) throw TimeoutError(what + ": timed out (" + detail + ")");
    if (c->err == REDIS_ERR_PROTOCOL)
        throw ProtocolError(what + ": unparsable reply stream (" + detail + ")");
    throw ConnectionError(what + ": " + detail);
}

bool looks_like_a_tls_server(const redisContext* c) {
    if (c == nullptr) return false;
    if (c->err == REDIS_ERR_EOF) return true;
    if (c->err == REDIS_ERR_IO) {
        static const std::string reset = std::generic_category().message(ECONNRESET);
        static const std::string pipe = std::generic_category().message(EPIPE);
        return std::strstr(c->errstr, reset.c_str()) != nullptr || std::strstr(c->errstr, pipe.c_str()) != nullptr;
    }
    // hiredis: Protocol error, got "\x15" as reply type byte
    return c->err == REDIS_ERR_PROTOCOL &&
           (std::strstr(c->errstr, "\\x15") != nullptr || std::strstr(c->errstr, "\\x16") != nullptr);
}

timeval to_timeval(std::chrono::milliseconds ms) noexcept {
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
    return tv;
}

std::string endpoint(std::string_view host, int port) {
    std::string out;
    if (host.find(':') != std::string_view::npos) {
        out.append("[").append(host).append("]");
    } else {
        out.append(host);
    }
    return out + ":" + std::to_string(port);
}

std::string printable(std::string_view bytes, std::size_t max) {
    std::string out;
    const std::size_t n = bytes.size() < max ? bytes.size() : max;
    for (std::size_t i = 0; i < n; ++i) {
        const auto ch = static_cast<unsigned char>(bytes[i]);
        if (ch >= 0x20 && ch < 0x7f && ch != '\\') {
            out.push_back(static_cast<char>(ch));
        } else {
            char buf[5];
            std::snprintf(buf, sizeof buf, "\\x%02x", ch);
            out.append(buf);
        }
    }
    if (bytes.size() > max) out.append("...");
    return out;
}

}  // namespace lockstep::detail
