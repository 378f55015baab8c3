#include "lockstep/cache/redis_cache.h"

#include "lockstep/core/error.h"

namespace lockstep {

std::optional<std::string> RedisCache::get(std::string_view key) {
    return client_.get(key);
}

void RedisCache::set(std::string_view key, std::string_view value, std::chrono::milliseconds ttl) {
    if (ttl.count() <= 0)
        throw ConfigError("ttl", "must be positive, got " + std::to_string(ttl.count()) + "ms");
    client_.set(key, value, ttl);
}

bool RedisCache::remove(std::string_view key) {
    return client_.del({std::string(key)}) > 0;
}

std::size_t RedisCache::remove_many(const std::vector<std::string>& keys) {
    // One DEL, one round trip. (Redis Cluster would need every key under one hash tag; lockstep
    // talks to a single server.)
    return static_cast<std::size_t>(client_.del(keys));
}

}  // namespace lockstep
