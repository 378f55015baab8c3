// LockService: makes the distributed locks of one backend by name. The one narrow interface a
// backend implements (leveldb's Env), so that a user switches a repository's locks from Redis
// to MySQL or ZooKeeper by handing it another service:
//
//   auto locks = lockstep::open_lock_service("zookeeper://127.0.0.1:2181");   // or redis://,
//   lockstep::RepositoryOptions o;                                             //  redis-fair://,
//   o.lock_mode = lockstep::LockMode::Mutex;                                   //  mysql://,
//   o.lock_service = locks.get();                                              //  memory:
//
// Backends (one folder each under locks/, docs/locks.md compares them with measured figures):
//   redis       RedisLockService (locks/redis/): RedisMutex, RedisReadWriteLock
//   redis-fair  the same service, whose mutex is RedisFairMutex (FIFO by server arrival)
//   mysql       MysqlLockService (locks/mysql/): GET_LOCK on a pinned session; mutex only
//   zookeeper   ZooKeeperLockService (locks/zookeeper/): ephemeral sequential nodes
//   memory      InMemoryLockService (locks/memory/): one process, for fast unit tests
//   redlock     RedlockLockService (locks/redlock/): a quorum of N independent Redis masters
//
// Thread safety: every member may be called from any thread. REQUIRES: the service outlives
// every lock it made.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/locks/distributed_mutex.h"
#include "lockstep/locks/distributed_read_write_lock.h"
#include "lockstep/locks/lock_options.h"

namespace lockstep {

class LockService {
public:
    virtual ~LockService() = default;

    // A mutex named `name` (the name rule of core/names.h, else ConfigError; every backend calls
    // check_name). Cheap; make one per use if you like: every
    // object of the same service and name shares the calling thread's hold.
    virtual std::unique_ptr<DistributedMutex> make_mutex(std::string name, LockOptions options = {}) = 0;
    // A read-write lock. ConfigError naming the backend when it has none (supports_read_write()).
    virtual std::unique_ptr<DistributedReadWriteLock> make_read_write_lock(std::string name,
                                                                           LockOptions options = {}) = 0;
    virtual bool supports_read_write() const noexcept { return true; }
    // "redis", "redis-fair", "mysql", "zookeeper", "memory".
    virtual std::string_view backend() const noexcept = 0;
    // The lock server's clock now (one round trip), so that nodes whose own clocks differ agree
    // on the time (scheduled jobs compute their slot from it: coordination/job_lock.h). Redis:
    // TIME; MySQL: UTC_TIMESTAMP(6); ZooKeeper: the mtime of a node it writes (the leader's
    // clock, milliseconds); Redlock: the first master that answers; memory: this process's
    // system clock. Backend failures as elsewhere (ConnectionError, DbError, ...); ConfigError
    // from a backend with no clock to read (the default).
    virtual std::chrono::system_clock::time_point server_time();
};

// Service-wide choices, whatever the backend.
struct LockServiceOptions {
    // Namespace of every lock name (Redis key prefix, ZooKeeper root node, MySQL lock-name prefix).
    std::string prefix = "ls:";
    // Called once for every hold of this service that is lost, before the lock's own on_lost.
    std::function<void(const LockLoss&)> on_lost;
};

// Opens a service by URL, choosing the backend by scheme: redis://, redis+cluster://,
// redis+sentinel:// (uri.h), redis-fair:// and redis-fair+cluster:// / redis-fair+sentinel://
// (the same URL syntax as redis://, redis+cluster://, redis+sentinel://), mysql://,
// zookeeper://host:port[,host:port...][?session_timeout_ms=N], memory:, redlock://host:port,host:port,... (redlock_lock_service.h). ConfigError for an
// unknown scheme (the message lists the registered ones) or a bad URL.
std::unique_ptr<LockService> open_lock_service(std::string_view url, LockServiceOptions options = {});

// The schemes open_lock_service accepts, in registration order.
std::vector<std::string> lock_service_schemes();

// Registers a backend's opener. A built-in backend does it in its locks/<backend>/src/registration.cpp
// (the registry calls it when the backend was built); a service may register its own.
using LockServiceOpener = std::function<std::unique_ptr<LockService>(std::string_view url, LockServiceOptions)>;
void register_lock_backend(std::string scheme, LockServiceOpener opener);

}  // namespace lockstep
