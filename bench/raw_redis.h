// RawRedis: the yardstick. One blocking hiredis connection used the plainest way hiredis offers
// (redisCommandArgv: format, write, read, one reply), with nothing of lockstep in the path, so a
// benchmark can put "what lockstep does" next to "the round trips that cannot be avoided".
//
// Thread safety: none; one per thread.
#pragma once

#include <initializer_list>
#include <memory>
#include <string_view>

#include <hiredis/hiredis.h>

#include "lockstep/core/redis_options.h"

namespace lockstep::bench {

struct ReplyDeleter {
    void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

class RawRedis {
public:
    // Connects (and AUTH / SELECT as the options say). Throws ConnectionError.
    explicit RawRedis(const RedisOptions& options);

    // One command, one round trip. Throws ProtocolError on an I/O failure or an error reply.
    ReplyPtr command(std::initializer_list<std::string_view> args);

private:
    struct ContextDeleter {
        void operator()(redisContext* c) const { redisFree(c); }
    };
    std::unique_ptr<redisContext, ContextDeleter> ctx_;
};

}  // namespace lockstep::bench
