// RedlockMasters: the N independent masters of a Redlock service, and the one operation Redlock
// needs of them: run the same script on each and collect each master's answer.
//
// Parallel mode sends the script to every master first (RedisConnection::send), then reads the
// replies (receive): the masters work at the same time, so a round costs the slowest master's
// round trip, not the sum. Sequential mode (send, read, next) exists as a benchmark baseline.
// A master that cannot be reached or answers an error gives no reply; it never fails the round.
// A master that restarted lost its scripts: NOSCRIPT is answered by EVAL on that master alone.
//
// Thread safety: every member may be called from any thread (each round borrows its own
// connections from each master's pool).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lockstep/cache/redis_client.h"

namespace lockstep::redlock_detail {

struct MasterReply {
    std::optional<RedisReply> reply;  // unset: no answer (see error)
    std::string error;
};

class RedlockMasters {
public:
    RedlockMasters(const std::vector<RedisOptions>& masters, bool parallel);

    std::size_t size() const noexcept { return clients_.size(); }
    RedisClient& client(std::size_t i) const { return *clients_.at(i); }
    // Runs `script` on every master i with only[i] (all when `only` is empty).
    std::vector<MasterReply> eval(const RedisScript& script, const std::vector<std::string>& keys,
                                  const std::vector<std::string>& args, const std::vector<bool>& only = {});

private:
    std::vector<std::unique_ptr<RedisClient>> clients_;
    bool parallel_;
};

}  // namespace lockstep::redlock_detail
