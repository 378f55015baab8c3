// Helpers shared by the topology tests (tests/topologies/): talk to one node of a private
// cluster or replication set directly, bypassing any routing.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lockstep/cache/redis_client.h"
#include "lockstep/cache/redis_connection.h"
#include "lockstep/locks/lock_client.h"

namespace lockstep::test {

// One command on the node at 127.0.0.1:`port`, on a fresh connection (no cluster routing: the
// tests ask a particular node about itself, e.g. CLUSTER INFO, CLUSTER MYID, SETSLOT).
inline RedisReply on_node(int port, const std::vector<std::string>& args) {
    RedisOptions o;
    o.port = port;
    RedisConnection conn(o);
    return conn.command(args);
}

// A RedisClient on a private topology plus a RedisLockClient on it that records every loss it
// reports. failover_wait is 20 s: a test's failover (kill a master, wait for the promotion) must
// not exhaust it on a loaded machine. `tune` adjusts the lock client's options (e.g.
// claim_refresh) before it is made.
class LockClientOnTopology {
public:
    LockClientOnTopology(RedisOptions redis_options, const std::string& prefix,
                         const std::function<void(LockClientOptions&)>& tune = {}) {
        redis_options.failover_wait = std::chrono::seconds(20);
        redis = std::make_unique<RedisClient>(redis_options);
        LockClientOptions lo;
        lo.prefix = prefix;
        lo.on_lost = [this](const LockLoss& l) {
            std::lock_guard g(mu_);
            losses_.push_back(l);
        };
        if (tune) tune(lo);
        locks = std::make_unique<RedisLockClient>(*redis, lo);
    }
    std::vector<LockLoss> reported() {
        std::lock_guard g(mu_);
        return losses_;
    }

    std::unique_ptr<RedisClient> redis;
    std::unique_ptr<RedisLockClient> locks;

private:
    std::mutex mu_;
    std::vector<LockLoss> losses_;
};

}  // namespace lockstep::test
