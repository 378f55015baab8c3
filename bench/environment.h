// Environment: what every benchmark family shares in one run of lockstep-bench: the servers
// (private ones unless LOCKSTEP_REDIS_URL / LOCKSTEP_MYSQL_URL name others), one RedisClient,
// one MysqlPool, one lock client, a key prefix and product ids of this process only.
//
// Thread safety: the accessors may be called from any thread; construct and destroy on one.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lockstep/cache/redis_client.h"
#include "lockstep/core/mysql_options.h"
#include "lockstep/core/redis_options.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/servers/local_servers.h"
#ifdef LOCKSTEP_HAVE_ZOOKEEPER
#include "lockstep/servers/local_zookeeper.h"
#endif
#include "raw_redis.h"
#if LOCKSTEP_BENCH_HAS_LOCKS
#include "lockstep/locks/lock_client.h"
#include "lockstep/locks/redis_lock_service.h"
#endif

namespace lockstep::bench {

// How long and how often each family runs. --quick shrinks every figure.
struct Budget {
    bool quick = false;
    // Repetitions of the latency pairs (ours and baseline interleave at random between them).
    int latency_repetitions = 9;
    double latency_min_time = 0.25;  // seconds per repetition
    // Repetitions and duration of the throughput families (threads, processes).
    int throughput_repetitions = 3;
    double throughput_min_time = 1.0;
    std::chrono::milliseconds handover_window{1500};
    int stampede_rounds = 20;

    static Budget full() { return {}; }
    static Budget quick_run() { return {true, 5, 0.1, 2, 0.4, std::chrono::milliseconds(500), 6}; }
};

class Environment {
public:
    // Starts (or adopts) the servers, creates the schema. Progress on stderr.
    explicit Environment(Budget budget);
    ~Environment();
    Environment(const Environment&) = delete;
    Environment& operator=(const Environment&) = delete;

    const Budget& budget() const noexcept { return budget_; }
    RedisClient& redis() { return *redis_; }
    MysqlPool& db() { return *db_; }
    const RedisOptions& redis_options() const noexcept { return redis_options_; }
    const MysqlOptions& mysql_options() const noexcept { return mysql_options_; }
    bool private_servers() const;
    // pid of the private mariadbd, 0 when the database is external (LOCKSTEP_MYSQL_URL).
    int mysql_pid() const;

    // Prefix of every Redis key of this run: "lsb<pid>:" (no hash tag: keys add their own).
    const std::string& prefix() const noexcept { return prefix_; }
    // `n` fresh product ids of this process; their rows are deleted when the run ends.
    std::int64_t new_ids(int n);
    // INSERT a product row (version 1, fence 0).
    void insert_product(std::int64_t id, long long stock);

    // INFO commandstats of the Redis server: calls and microseconds spent, per command ("evalsha"),
    // scripts included (their inner commands are counted too). Deltas of two snapshots tell what
    // a piece of code costs the server, whatever else the client layer does. On a cluster: summed
    // over every master (a command runs on its key's master, not on the one a keyless INFO
    // would reach), as is redis_cpu_seconds().
    struct CommandStat {
        long long calls = 0;
        long long usec = 0;
    };
    std::map<std::string, CommandStat> command_stats();
    // CPU seconds the Redis server has used (INFO cpu: used_cpu_sys + used_cpu_user).
    double redis_cpu_seconds();

    std::string redis_version();
    std::string mariadb_version();

#if LOCKSTEP_BENCH_HAS_LOCKS
    RedisLockClient& locks() {
        return *locks_;
    }
    // locks() as a LockService (what RepositoryOptions::lock_service takes).
    RedisLockService& lock_service() { return *lock_service_; }
#endif

private:
    // One INFO <section> reply per master (one on a single server or behind Sentinel).
    std::vector<std::string> info_of_masters(const char* section);

    Budget budget_;
    std::unique_ptr<LocalServers> servers_;
    RedisOptions redis_options_;
    MysqlOptions mysql_options_;
    std::unique_ptr<RedisClient> redis_;
    std::unique_ptr<MysqlPool> db_;
#if LOCKSTEP_BENCH_HAS_LOCKS
    std::unique_ptr<RedisLockClient> locks_;
    std::unique_ptr<RedisLockService> lock_service_;
#endif
    // Cluster only: a raw connection to each master, for INFO (opened at the first call).
    std::mutex masters_mutex_;
    std::vector<std::unique_ptr<RawRedis>> masters_;
    std::string prefix_;
    std::int64_t first_id_ = 0;
    std::atomic<std::int64_t> next_id_{0};
};

// Context switches (voluntary and not) of every thread of this process so far, from
// /proc/self/task/*/status. A blocking round trip costs the caller at least one; a wake-up of
// another thread (a condition variable notified) costs that thread one.
long long process_context_switches();

// CPU seconds (user + system) of every thread of this process so far.
double process_cpu_seconds();

// utime + stime of a /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat file, in seconds; 0 if
// it cannot be read.
double stat_file_cpu_seconds(const std::string& path);

// CPU seconds all cores of the machine have been busy so far (/proc/stat: everything but idle
// and iowait). Less this process and Redis, it tells how much else ran during a benchmark.
double machine_busy_seconds();

#ifdef LOCKSTEP_HAVE_ZOOKEEPER
// The run's one private standalone ZooKeeper (LocalZooKeeper, forceSync=no), started at the first
// call (2-5 s of JVM start) and shared by every family that needs one. Thread-safe.
LocalZooKeeper& shared_zookeeper();
#endif

// Progress line on stderr ("bench: ..."), flushed at once.
void progress(const std::string& line);

}  // namespace lockstep::bench
