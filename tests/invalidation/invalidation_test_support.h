// Shared pieces of the invalidation tests: one product entity, clients on the private servers,
// a plain-client bypass (the `mariadb` command-line client, C9) and a child-process writer (C5).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/cache/redis_client.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/invalidation/binlog_invalidator.h"
#include "lockstep/servers/child_process.h"
#include "lockstep/strategies/cached_repository.h"
#include "eventually.h"  // eventually(...): for metrics bumped just after the effect a test observed
#include "test_servers.h"

namespace lockstep::test {

struct Item {
    std::int64_t id = 0;
    std::string name;
    std::int64_t price = 0;
    int stock = 0;
};
void to_json(nlohmann::json& j, const Item& p);
void from_json(const nlohmann::json& j, Item& p);

Entity<Item> item_entity();  // name "product", table "products"
MysqlPool& db();
RedisClient& redis();
// A key prefix unique to this call, without braces (EntityKeys refuses them): "inv<pid>_<n>:".
std::string fresh_prefix();
std::int64_t fresh_id();
// A follower server id unique to this process and call.
std::uint32_t fresh_server_id();

// Runs `sql` through the `mariadb` command-line client: a writer that no library code sees.
void mariadb_client(const std::string& sql);

// Polls until `key` is gone; the time it took, or nullopt after `timeout`.
std::optional<std::chrono::microseconds> time_until_gone(const std::string& key, std::chrono::milliseconds timeout);

InvalidationMap products_map(const std::string& prefix);
BinlogInvalidatorOptions follower_options(const std::string& name);

// This test binary re-run as a child with LOCKSTEP_INVALIDATION_CHILD=<role> (child_roles.cpp),
// or another program; one thread uses a Child at a time (lockstep::testing::ChildProcess).
class Child : public lockstep::testing::ChildProcess {
public:
    // This binary as `role`, with the Redis/MySQL URLs (LOCKSTEP_INVALIDATION_REDIS, _MYSQL) and
    // then `env` added to the environment.
    Child(const std::string& role, const std::map<std::string, std::string>& env);
    // Runs another program (argv[0] a path) with this process's environment.
    explicit Child(const std::vector<std::string>& argv);
    void kill_now();  // SIGKILL and reap
    // SIGTERM, then waits up to `timeout` for it to exit: its exit code (128 + the signal when one
    // ended it), or -1 when it did not exit in time (then it is SIGKILLed and reaped).
    int terminate(std::chrono::milliseconds timeout);
};

}  // namespace lockstep::test
