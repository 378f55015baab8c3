// The Redis key of one entity id, and the lock name that goes with it.
//
//   EntityKeys keys("ls:", "product");
//   keys.value(42)      -> "ls:{product:42}"        the cache entry (value, "not found" or marker)
//   keys.lock_name(42)  -> "product:42"             RedisMutex / RedisReadWriteLock name: their keys
//                                                   are "<lock prefix>{product:42}:lock", ... (lock_keys.h)
//   keys.hash_tag(42)   -> "product:42"
//
// Every key of one id shares the hash tag `{<name>:<id>}`, so every script stays legal on Redis
// Cluster. That is why neither the prefix nor the name may contain '{' or '}' (ConfigError):
// Redis hashes the FIRST braced part of a key.
//
// Thread safety: a plain value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lockstep {

class EntityKeys {
public:
    EntityKeys(std::string prefix, std::string entity_name);

    std::string value(std::int64_t id) const;
    std::string lock_name(std::int64_t id) const;
    std::string hash_tag(std::int64_t id) const { return lock_name(id); }

    const std::string& prefix() const noexcept { return prefix_; }
    const std::string& entity_name() const noexcept { return name_; }

private:
    std::string prefix_;
    std::string name_;
};

// The Redis Cluster hash tag of `key`: the part between the first '{' and the next '}', if that
// part is not empty; otherwise the whole key (as Redis hashes it).
std::string_view redis_hash_tag(std::string_view key) noexcept;

}  // namespace lockstep
