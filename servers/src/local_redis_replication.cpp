#include "lockstep/servers/local_redis_replication.h"

#include <functional>

#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"
#include "lockstep/core/uri.h"
#include "lockstep/servers/local_servers.h"
#include "redis_probe.h"

namespace lockstep {

using namespace servers_detail;
using Clock = std::chrono::steady_clock;

struct LocalRedisReplication::Impl {
    LocalRedisReplicationOptions options;
    std::unique_ptr<LocalServers> master, replica;

    int port(const LocalServers& s) const { return s.redis_options().port; }
    std::string info(const LocalServers& s) const { return redis_probe(port(s), {"INFO", "replication"}); }
    // Polls a real server state until it holds (each probe is a round trip, not a guess).
    void until(const std::function<bool()>& condition, const std::string& what) const {
        if (!poll_until(Clock::now() + options.start_timeout, std::chrono::milliseconds(20), condition)) {
            throw ConnectionError("local Redis replication: " + what + " not reached in time");
        }
    }
    // The replica says "up" once it loaded the sync; the master counts it (WAIT, connected_slaves)
    // only after its first REPLCONF ACK, up to a second later.
    void until_in_sync() const {
        until(
            [&] {
                return info_value(info(*replica), "master_link_status") == "up" &&
                       info_value(info(*master), "slave0").find("state=online") != std::string::npos;
            },
            "replica in sync");
    }
    void command(const LocalServers& s, const std::vector<std::string>& args) const {
        const std::string reply = redis_probe(port(s), args, std::chrono::milliseconds(2000));
        if (reply.rfind("+OK", 0) != 0) throw ProtocolError("local Redis replication: " + args[0] + " answered '" + reply + "'");
    }
};

LocalRedisReplication::LocalRedisReplication(LocalRedisReplicationOptions options) : impl_(std::make_unique<Impl>()) {
    auto& m = *impl_;
    m.options = std::move(options);
    const LocalServersOptions base = private_redis_node(m.options.redis_server, m.options.start_timeout);
    LocalServersOptions master = base;
    // Redis 7 waits 5 s for more replicas before a diskless full sync; there is only one.
    master.redis_extra_args = {"--repl-diskless-sync-delay", "0"};
    m.master = std::make_unique<LocalServers>(master);
    LocalServersOptions replica = base;
    replica.redis_extra_args = {"--replicaof", "127.0.0.1", std::to_string(m.port(*m.master))};
    m.replica = std::make_unique<LocalServers>(replica);
    m.until_in_sync();
    logger()->info("private Redis master {} with replica {}", master_url(), replica_url());
}

LocalRedisReplication::~LocalRedisReplication() = default;

std::string LocalRedisReplication::master_url() const { return "redis://127.0.0.1:" + std::to_string(impl_->port(*impl_->master)); }
std::string LocalRedisReplication::replica_url() const { return "redis://127.0.0.1:" + std::to_string(impl_->port(*impl_->replica)); }
RedisOptions LocalRedisReplication::master_options() const { return parse_redis_url(master_url()); }
RedisOptions LocalRedisReplication::replica_options() const { return parse_redis_url(replica_url()); }

void LocalRedisReplication::hold_back_replication() {
    auto& m = *impl_;
    // The master has no password, so any AUTH the replica sends on reconnecting is refused.
    m.command(*m.replica, {"CONFIG", "SET", "masterauth", "held-back"});
    redis_probe(m.port(*m.master), {"CLIENT", "KILL", "TYPE", "replica"});
    m.until(
        [&] {
            return info_value(m.info(*m.master), "connected_slaves") == "0" &&
                   info_value(m.info(*m.replica), "master_link_status") == "down";
        },
        "replication held back");
}

void LocalRedisReplication::fail_over() {
    auto& m = *impl_;
    m.master->kill_redis();
    m.command(*m.replica, {"REPLICAOF", "NO", "ONE"});
    m.until([&] { return info_value(m.info(*m.replica), "role") == "master"; }, "replica promoted");
}

void LocalRedisReplication::heal() {
    auto& m = *impl_;
    if (m.master->redis_pid() != 0) return;  // not failed over
    std::swap(m.master, m.replica);
    m.command(*m.master, {"CONFIG", "SET", "repl-diskless-sync-delay", "0"});
    m.replica->start_redis();
    m.command(*m.replica, {"REPLICAOF", "127.0.0.1", std::to_string(m.port(*m.master))});
    m.until_in_sync();
}

}  // namespace lockstep
