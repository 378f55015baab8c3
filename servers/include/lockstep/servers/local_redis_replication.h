// LocalRedisReplication: a private Redis master with one replica and no sentinels, for forcing
// RACES L8 (failover loses the lock) deterministically in the tests and the demo: replication is
// held back on purpose (not by luck), the master is SIGKILLed and the replica promoted by hand.
// Each node is a LocalServers (own temp dir, reaper), so nothing is left running.
//
// Why a wrong masterauth: a replica that is paused (SIGSTOP, DEBUG SLEEP) or a master under
// CLIENT PAUSE still replicates once it resumes; a replica whose link is cut and that cannot
// authenticate to reconnect never receives another write (measured 2026-11-23).
//
// Thread safety: construct, hold_back_replication and fail_over on one thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "lockstep/core/redis_options.h"

namespace lockstep {

struct LocalRedisReplicationOptions {
    std::string redis_server = "redis-server";
    std::chrono::milliseconds start_timeout{std::chrono::seconds(30)};
};

class LocalRedisReplication {
public:
    // Returns once the replica is in sync with the master.
    explicit LocalRedisReplication(LocalRedisReplicationOptions options = {});
    ~LocalRedisReplication();
    LocalRedisReplication(const LocalRedisReplication&) = delete;
    LocalRedisReplication& operator=(const LocalRedisReplication&) = delete;

    std::string master_url() const;   // redis://127.0.0.1:<master port>
    std::string replica_url() const;  // redis://127.0.0.1:<replica port>
    RedisOptions master_options() const;
    RedisOptions replica_options() const;

    // Holds replication back for good: the replica gets a wrong masterauth, the master drops its
    // link (CLIENT KILL TYPE replica), and the replica cannot resync. Returns once the master has
    // no connected replica and the replica's link is down: every later write of the master is
    // missing on the replica. ConnectionError if that state is not reached in start_timeout.
    void hold_back_replication();
    // SIGKILLs the master and promotes the replica (REPLICAOF NO ONE); returns once the replica
    // says it is a master. From then on replica_url() is the master clients must use.
    void fail_over();
    // After fail_over: starts the killed node again (empty) as the replica of the promoted one
    // and returns once it is in sync. The roles are swapped: master_url() is the promoted node,
    // replica_url() the restarted one, ready for another round.
    void heal();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep
