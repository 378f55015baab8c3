// What the near-cache topology tests call "client A": a NearCache fed by a
// RedisInvalidationChannel on a topology, filled the way a repository's near miss fills it
// (ticket, tracked GET, fill). Client B is any RedisClient on the same topology.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "eventually.h"
#include "lockstep/cache/near_cache.h"
#include "lockstep/cache/redis_invalidation_channel.h"
#include "lockstep/core/error.h"

namespace lockstep::test {

struct NearCacheClient {
    explicit NearCacheClient(const RedisOptions& redis, bool drop_rule = true)
        : local(near_options(drop_rule)), channel(redis, local) {}

    static NearCacheOptions near_options(bool drop_rule) {
        NearCacheOptions n;
        n.ttl = std::chrono::seconds(120);  // never the reason an entry goes in these tests
        n.drop_rule = drop_rule;
        return n;
    }

    // One near miss: a tracked read and a fill with the ticket taken before it. The value read
    // ("" for none), or nullopt when the channel refused (down, or the slot moved).
    std::optional<std::string> read_and_fill(const std::string& key) {
        const NearCache::Ticket ticket = local.begin_fill(key);
        std::optional<std::string> value;
        try {
            value = channel.tracked_get(key);
        } catch (const Error&) {
            return std::nullopt;
        }
        if (value) local.fill(key, ticket, 1, *value);
        return value.value_or("");
    }
    // Reads `key` until the near cache holds `expected` for it (a fill is refused while a
    // topology change or an invalidation is in flight, rightly).
    bool hold(const std::string& key, const std::string& expected,
              std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
        return eventually(
            [&] {
                if (local_value(key) == expected) return true;
                read_and_fill(key);
                return local_value(key) == expected;
            },
            timeout);
    }
    std::optional<std::string> local_value(const std::string& key) {
        auto e = local.get(key);
        if (!e) return std::nullopt;
        return e->bytes;
    }

    NearCache local;
    RedisInvalidationChannel channel;
};

}  // namespace lockstep::test
