// RawRedis: the yardstick. One blocking hiredis connection used the plainest way hiredis offers
// (redisCommandArgv: format, write, read, one reply), with nothing of lockstep in the path, so a
// benchmark can put "what lockstep does" next to "the round trips that cannot be avoided".
//
// Thread safety: none; one per thread.
#pragma once

#include <initializer_list>
#include <memory>
#include <string_view>
#include <vector>

#include <hiredis/hiredis.h>

#include "lockstep/core/redis_options.h"

namespace lockstep {
class RedisClient;
}

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

// The server a raw baseline must send a command on `key` to, as options for RawRedis: the
// client's own server on one node; the master of the key's slot on a cluster (redis+cluster://:
// the first seed node would answer MOVED), as `client` routes it now; the master in use behind
// Sentinel (redis+sentinel://: host/port name a sentinel). So a baseline stays one plain round
// trip whatever the URL.
RedisOptions raw_options_for_key(RedisClient& client, std::string_view key);

// Every master `client` writes to: its one server, the Sentinel's master, or each master of the
// cluster (CLUSTER NODES, failed ones left out). For per-server figures a bench sums (INFO).
std::vector<RedisOptions> raw_master_options(RedisClient& client);

}  // namespace lockstep::bench
