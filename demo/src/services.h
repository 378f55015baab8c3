// Services: the clients one demo process talks through: a RedisClient, a MysqlPool, a lock
// client, and the Signals its actors coordinate with. The demo process has one; every worker
// process (--processes) makes its own, so each process has its own pools and its own lock
// client, as separate services would.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

#include "lockstep/core/mysql_options.h"
#include "lockstep/core/redis_options.h"
#include "signals.h"

namespace lockstep {
class RedisClient;
class MysqlPool;
class RedisLockClient;
class RedisLockService;
}  // namespace lockstep

namespace lockstep::demo {

// Where the servers are.
struct Endpoints {
    std::string redis_url;
    std::string mysql_url;
    // A replica of mysql_url (C10); empty when there is none (race_c10.cpp then starts its own).
    std::string mysql_replica_url;
};

class Services {
public:
    // `prefix` namespaces every Redis key of this demo run ("lsdemo-1a2b3c4d:"); `concurrency`
    // sizes the pools (threads that may use them at once).
    Services(const Endpoints& endpoints, std::string prefix, int concurrency);
    ~Services();
    Services(const Services&) = delete;
    Services& operator=(const Services&) = delete;

    RedisClient& redis() noexcept { return *redis_; }
    MysqlPool& db() noexcept { return *db_; }
    Signals& signals() noexcept { return *signals_; }
    // The process's lock client (created on first use). Throws ConfigError when lockstep was
    // built without its locks layer.
    RedisLockClient& locks();
    // A lock client of its own: another "process" in thread mode (its own id and watchdog).
    std::shared_ptr<RedisLockClient> new_lock_client();
    // locks() as a LockService (what RepositoryOptions::lock_service takes).
    RedisLockService& lock_service();

    const Endpoints& endpoints() const noexcept { return endpoints_; }
    const RedisOptions& redis_options() const noexcept { return redis_options_; }
    const MysqlOptions& mysql_options() const noexcept { return mysql_options_; }
    const std::string& prefix() const noexcept { return prefix_; }
    int concurrency() const noexcept { return concurrency_; }

private:
    Endpoints endpoints_;
    RedisOptions redis_options_;
    MysqlOptions mysql_options_;
    std::string prefix_;
    int concurrency_;
    std::unique_ptr<RedisClient> redis_;
    std::unique_ptr<MysqlPool> db_;
    std::unique_ptr<Signals> signals_;
    std::mutex locks_mutex_;
    std::shared_ptr<RedisLockClient> locks_;
    std::unique_ptr<RedisLockService> lock_service_;
};

}  // namespace lockstep::demo
