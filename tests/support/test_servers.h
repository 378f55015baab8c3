// The private servers of one test binary: started on first use, stopped at exit. Honour
// LOCKSTEP_REDIS_URL / LOCKSTEP_MYSQL_URL like everything else.
//
// LOCKSTEP_TEST_REDIS_TOPOLOGY picks the shape of the private Redis (the lock
// and repository suites run unchanged on a cluster):
//   unset, "" or "standalone"  one private redis-server (LocalServers), as always;
//   "cluster"                  a private 3-master Redis Cluster (LocalRedisCluster, no replicas:
//                              the suites test lock/repository semantics, not failover), and
//                              redis_url() is its redis+cluster:// URL;
//   "tls"                      one private redis-server on a TLS port only
//                              (LocalServersOptions::redis_tls), and redis_url() is its rediss://
//                              URL (docs/tls.md);
//   "sentinel"                 a private master, replica and three sentinels
//                              (LocalRedisSentinel), and redis_url() is its redis+sentinel:// URL
//                              (the lock suites' network cases behind Sentinel).
// Anything else is a ConfigError naming the variable. LOCKSTEP_REDIS_URL wins over it (an
// external cluster is used as it is; redis_is_cluster() then follows the URL's scheme).
//
// LOCKSTEP_TEST_MYSQL_TLS=1 serves the private MariaDB over TLS only
// (LocalServersOptions::mysql_tls): mysql_url() and mysql_options() carry tls=verify_identity
// with the private CA, and a plain connection is refused. Unset, "" or "0": plain, as always;
// anything else is a ConfigError. LOCKSTEP_MYSQL_URL wins over it.
//
// A test that is about one Redis node (it kills/restarts it, CONFIG SETs it, FLUSHALLs it, scans
// its KEYS, counts its MONITOR output) states so with LOCKSTEP_REQUIRE_STANDALONE_REDIS(reason)
// and is skipped on a cluster with that reason; docs/testing.md lists them.
#pragma once

#include <memory>
#include <string>

#include "lockstep/core/mysql_options.h"
#include "lockstep/core/redis_options.h"
#include "lockstep/servers/local_redis_cluster.h"
#include "lockstep/servers/local_redis_sentinel.h"
#include "lockstep/servers/local_servers.h"

namespace lockstep::test {

// LocalServers' interface as the tests use it, over a standalone Redis or a cluster.
class TestServers {
public:
    TestServers();
    ~TestServers();
    TestServers(const TestServers&) = delete;
    TestServers& operator=(const TestServers&) = delete;

    std::string redis_url() const;
    RedisOptions redis_options() const;
    std::string mysql_url() const;
    MysqlOptions mysql_options() const;

    // True when the Redis in use is a Redis Cluster (private or external).
    bool redis_is_cluster() const;

    // True when the Redis in use is reached through Sentinel (private or external).
    bool redis_is_sentinel() const;

    // True when this process started one private redis-server that it may kill or restart
    // (false on a cluster or behind Sentinel: there is no single node to restart).
    bool owns_redis() const noexcept;
    bool owns_mysql() const noexcept;

    // The single private redis-server / mariadbd (ConfigError on a cluster or an external one).
    void kill_redis();
    void start_redis();
    void restart_redis();
    int redis_pid() const noexcept;  // 0 on a cluster
    void kill_mysql();
    void start_mysql();
    void restart_mysql();
    int mysql_pid() const noexcept;

    // The private cluster, or nullptr (standalone or external Redis).
    LocalRedisCluster* cluster() noexcept { return cluster_.get(); }
    // The private Sentinel setup, or nullptr.
    LocalRedisSentinel* sentinel() noexcept { return sentinel_.get(); }

private:
    std::unique_ptr<LocalRedisCluster> cluster_;  // started before `local_` (MySQL only then)
    std::unique_ptr<LocalRedisSentinel> sentinel_;  // likewise
    std::unique_ptr<LocalServers> local_;
};

TestServers& servers();

// A key prefix unique to this process and call, with a hash tag so multi-key scripts stay
// cluster-legal: "{t<pid>_<n>}:".
std::string unique_prefix();
// The same without the hash tag, "t<pid>_<n>:", for lock prefixes: every key of a lock name
// carries its own tag `{<name>}` (lock_keys.h), so on a cluster each name routes to its own
// slot's master; a tag in the prefix would put every lock of a test on one node and hide a
// script or a pipeline that mixed two names.
std::string unique_lock_prefix();

}  // namespace lockstep::test

// Skips the current test when the servers are external (restarts need a private server) or the
// Redis is a cluster or behind Sentinel (no single node to restart).
#define LOCKSTEP_REQUIRE_OWNED_REDIS()                                                         \
    do {                                                                                       \
        if (::lockstep::test::servers().redis_is_cluster())                                    \
            GTEST_SKIP() << "needs one private redis-server to kill/restart; Redis is a cluster"; \
        if (::lockstep::test::servers().redis_is_sentinel())                                   \
            GTEST_SKIP() << "needs one private redis-server to kill/restart; Redis is behind Sentinel"; \
        if (!::lockstep::test::servers().owns_redis()) GTEST_SKIP() << "external Redis";        \
    } while (0)
#define LOCKSTEP_REQUIRE_OWNED_MYSQL()                                                  \
    do {                                                                                \
        if (!::lockstep::test::servers().owns_mysql()) GTEST_SKIP() << "external MySQL"; \
    } while (0)
// Skips the current test on a Redis Cluster: `reason` says why the test is about one node.
#define LOCKSTEP_REQUIRE_STANDALONE_REDIS(reason)                                             \
    do {                                                                                      \
        if (::lockstep::test::servers().redis_is_cluster())                                   \
            GTEST_SKIP() << "standalone Redis only (Redis is a cluster): " << (reason);       \
    } while (0)
