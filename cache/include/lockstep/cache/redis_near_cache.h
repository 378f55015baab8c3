// RedisNearCache: a NearCache and the RedisInvalidationChannel that keeps it honest, made and
// owned together: what a repository is given to serve an entity's hot entries from process
// memory (RepositoryOptions::near_cache, docs/near-cache.md). One may serve several entities;
// its bounds and its drops are then shared.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include "lockstep/cache/near_cache.h"
#include "lockstep/cache/redis_invalidation_channel.h"
#include "lockstep/core/redis_options.h"

namespace lockstep {

class RedisNearCache {
public:
    // Subscribes (on every master of a cluster) before returning; throws what
    // RedisInvalidationChannel's constructor throws.
    explicit RedisNearCache(RedisOptions redis, NearCacheOptions near = {}, RedisTrackingOptions tracking = {})
        : local_(std::move(near)), channel_(std::move(redis), local_, std::move(tracking)) {}

    NearCache& local() noexcept { return local_; }
    const NearCache& local() const noexcept { return local_; }
    RedisInvalidationChannel& channel() noexcept { return channel_; }
    const RedisInvalidationChannel& channel() const noexcept { return channel_; }

private:
    NearCache local_;  // declared first: the channel feeds it until the channel is gone
    RedisInvalidationChannel channel_;
};

}  // namespace lockstep
