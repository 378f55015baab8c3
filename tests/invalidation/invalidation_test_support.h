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

// This test binary re-run as a child with LOCKSTEP_INVALIDATION_CHILD=<role> (child_roles.cpp).
class Child {
public:
    Child(const std::string& role, const std::map<std::string, std::string>& env);
    // Runs another program (argv[0] a path) with this process's environment, stdout piped.
    explicit Child(const std::vector<std::string>& argv);
    ~Child();  // SIGKILLs it if still running, and reaps it
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;
    // The next stdout line starting with `prefix`, or nullopt at EOF / timeout.
    std::optional<std::string> expect(const std::string& prefix, std::chrono::milliseconds timeout);
    void kill_now();  // SIGKILL and reap
    // SIGTERM, then waits up to `timeout` for it to exit; its exit code, or -1 (then SIGKILLed).
    int terminate(std::chrono::milliseconds timeout);
    int pid() const noexcept { return pid_; }

private:
    void spawn(const std::string& path, std::vector<std::string> argv, std::vector<std::string> env);
    int pid_ = -1;
    int out_ = -1;
    bool reaped_ = false;
    std::string buffer_;
};

}  // namespace lockstep::test
