// RedisCache: the Cache interface over a RedisClient. Values are stored as raw bytes with PX
// expiry. The client is borrowed: it must outlive the cache.
#pragma once

#include "lockstep/cache/cache.h"
#include "lockstep/cache/redis_client.h"

namespace lockstep {

class RedisCache final : public Cache {
public:
    explicit RedisCache(RedisClient& client) : client_(client) {}

    std::optional<std::string> get(std::string_view key) override;
    void set(std::string_view key, std::string_view value, std::chrono::milliseconds ttl) override;
    bool remove(std::string_view key) override;
    std::size_t remove_many(const std::vector<std::string>& keys) override;

    RedisClient& client() noexcept { return client_; }

private:
    RedisClient& client_;
};

}  // namespace lockstep
