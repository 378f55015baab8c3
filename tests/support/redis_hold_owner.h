// The owner value a Redis lock hold of the calling thread has in its hash or sorted set: the
// member named "<thread owner>:<hold number>" (RedisLockClient::owner_of_this_thread() is the
// thread owner). For tests that look at the lock keys directly.
#pragma once

#include <string>

#include "lockstep/cache/redis_client.h"

namespace lockstep::test {

// The member of the hash (HKEYS) or sorted set (ZRANGE) at `key` that belongs to `thread_owner`;
// "" when there is none.
inline std::string hold_owner_in(RedisClient& redis, const std::string& key, const std::string& thread_owner,
                                 bool sorted_set = false) {
    const auto members = sorted_set ? redis.command({"ZRANGE", key, "0", "-1"}) : redis.command({"HKEYS", key});
    for (const auto& m : members.elements()) {
        if (m.str().rfind(thread_owner + ":", 0) == 0) return m.str();
    }
    return "";
}

}  // namespace lockstep::test
