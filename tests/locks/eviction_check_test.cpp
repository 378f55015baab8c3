// B3: lock keys carry TTLs, so a Redis that evicts (maxmemory with a volatile-* or
// allkeys-* policy) can delete a held lock. The lock client checks the server at construction.
// Each test starts its own redis-server with a real maxmemory setting.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"
#include "lockstep/locks/lock_client.h"
#include "lockstep/locks/redis_mutex.h"
#include "lockstep/servers/local_servers.h"

namespace lockstep {
namespace {

LocalServersOptions redis_with(std::vector<std::string> arguments) {
    LocalServersOptions o;
    o.mysql = false;
    o.use_environment = false;
    o.redis_extra_args = std::move(arguments);
    return o;
}

TEST(EvictionCheckTest, B3_EvictingPoliciesAreRefusedWithConfigError) {
    LocalServers server(redis_with({"--maxmemory", "8mb", "--maxmemory-policy", "allkeys-lru"}));
    RedisClient redis(server.redis_options());
    for (const char* policy : {"allkeys-lru", "volatile-lru", "volatile-ttl", "allkeys-random"}) {
        redis.command({"CONFIG", "SET", "maxmemory-policy", policy});
        try {
            RedisLockClient locks(redis);
            ADD_FAILURE() << policy << " was accepted";
        } catch (const ConfigError& e) {
            EXPECT_EQ(e.part(), "maxmemory-policy");
            EXPECT_NE(std::string(e.what()).find(policy), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find("noeviction"), std::string::npos) << e.what();
        }
    }
}

TEST(EvictionCheckTest, B3_NoevictionOrNoMaxmemoryIsAccepted) {
    LocalServers server(redis_with({"--maxmemory", "8mb", "--maxmemory-policy", "noeviction"}));
    RedisClient redis(server.redis_options());
    {
        RedisLockClient locks(redis);
        EXPECT_FALSE(locks.eviction_possible());
        RedisMutex m(locks, "b3");
        EXPECT_TRUE(m.try_lock());
        m.unlock();
    }
    redis.command({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"});
    redis.command({"CONFIG", "SET", "maxmemory", "0"});  // no limit: nothing is ever evicted
    RedisLockClient locks(redis);
    EXPECT_FALSE(locks.eviction_possible());
}

TEST(EvictionCheckTest, B3_WarnModeAcceptsAnEvictingServerLoudly) {
    LocalServers server(redis_with({"--maxmemory", "8mb", "--maxmemory-policy", "volatile-lru"}));
    RedisClient redis(server.redis_options());
    LockClientOptions o;
    o.eviction_check = EvictionCheck::Warn;
    RedisLockClient locks(redis, o);
    EXPECT_TRUE(locks.eviction_possible());
}

TEST(EvictionCheckTest, B3_WithoutConfigTheClientWarnsAndWorks) {
    // CONFIG renamed away, as managed services and hardened setups do: the check cannot run.
    LocalServers server(redis_with({"--maxmemory", "8mb", "--maxmemory-policy", "allkeys-lru",
                                    "--rename-command", "CONFIG", ""}));
    RedisClient redis(server.redis_options());
    RedisLockClient locks(redis);
    EXPECT_FALSE(locks.eviction_possible());
    RedisMutex m(locks, "b3-noconfig");
    EXPECT_TRUE(m.try_lock());
    m.unlock();
}

}  // namespace
}  // namespace lockstep
