#include "raw_redis.h"

#include <string>
#include <vector>

#include "lockstep/core/error.h"

namespace lockstep::bench {

RawRedis::RawRedis(const RedisOptions& options) {
    timeval tv{};
    tv.tv_sec = options.connect_timeout.count() / 1000;
    tv.tv_usec = (options.connect_timeout.count() % 1000) * 1000;
    ctx_.reset(redisConnectWithTimeout(options.host.c_str(), options.port, tv));
    if (!ctx_ || ctx_->err) {
        throw ConnectionError("raw hiredis connect to " + options.host + ":" + std::to_string(options.port) +
                              ": " + (ctx_ ? ctx_->errstr : "out of memory"));
    }
    if (!options.password.empty()) {
        if (options.user.empty()) {
            command({"AUTH", options.password});
        } else {
            command({"AUTH", options.user, options.password});
        }
    }
    if (options.db != 0) command({"SELECT", std::to_string(options.db)});
}

ReplyPtr RawRedis::command(std::initializer_list<std::string_view> args) {
    // Fixed-size arrays on the stack: the baseline pays no allocation of its own.
    const char* argv[16];
    size_t lens[16];
    int argc = 0;
    for (auto a : args) {
        if (argc == 16) throw ConfigError("raw command", "at most 16 arguments");
        argv[argc] = a.data();
        lens[argc] = a.size();
        ++argc;
    }
    ReplyPtr reply(static_cast<redisReply*>(redisCommandArgv(ctx_.get(), argc, argv, lens)));
    if (!reply) throw ProtocolError(std::string("raw hiredis: ") + ctx_->errstr);
    if (reply->type == REDIS_REPLY_ERROR)
        throw ProtocolError("raw hiredis: " + std::string(reply->str, reply->len));
    return reply;
}

}  // namespace lockstep::bench
