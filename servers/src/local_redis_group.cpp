#include "lockstep/servers/local_redis_group.h"

#include <signal.h>

#include <vector>

#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"
#include "lockstep/servers/local_servers.h"
#include "redis_probe.h"

namespace lockstep {

struct LocalRedisGroup::Impl {
    std::vector<std::unique_ptr<LocalServers>> nodes;

    LocalServers& node(std::size_t i) const {
        if (i >= nodes.size()) {
            throw ConfigError("node", std::to_string(i) + " is not a node of this " + std::to_string(nodes.size()) +
                                          "-master group");
        }
        return *nodes[i];
    }
};

LocalRedisGroup::LocalRedisGroup(LocalRedisGroupOptions options) : impl_(std::make_unique<Impl>()) {
    if (options.masters < 1) throw ConfigError("masters", "a Redis group needs at least one master");
    const LocalServersOptions base = servers_detail::private_redis_node(options.redis_server, options.start_timeout);
    // LocalServers starts redis-server with --save "" --appendonly no: a restart is empty.
    for (int i = 0; i < options.masters; ++i) impl_->nodes.push_back(std::make_unique<LocalServers>(base));
    logger()->info("private Redis group of {} independent masters: {}", options.masters, hosts());
}

LocalRedisGroup::~LocalRedisGroup() {
    for (auto& n : impl_->nodes) {
        if (n->redis_pid() > 0) ::kill(n->redis_pid(), SIGCONT);  // a stopped server cannot be shut down
    }
    impl_->nodes.clear();
}

std::size_t LocalRedisGroup::size() const noexcept { return impl_->nodes.size(); }

std::string LocalRedisGroup::hosts() const {
    std::string out;
    for (std::size_t i = 0; i < size(); ++i) out += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(port(i));
    return out;
}

std::string LocalRedisGroup::redlock_url() const { return "redlock://" + hosts(); }
RedisOptions LocalRedisGroup::redis_options(std::size_t node) const { return impl_->node(node).redis_options(); }
std::string LocalRedisGroup::redis_url(std::size_t node) const { return impl_->node(node).redis_url(); }
int LocalRedisGroup::port(std::size_t node) const { return impl_->node(node).redis_options().port; }
int LocalRedisGroup::pid(std::size_t node) const { return impl_->node(node).redis_pid(); }
void LocalRedisGroup::kill(std::size_t node) {
    if (pid(node) > 0) ::kill(pid(node), SIGCONT);
    impl_->node(node).kill_redis();
}
void LocalRedisGroup::start(std::size_t node) { impl_->node(node).start_redis(); }
void LocalRedisGroup::restart(std::size_t node) {
    kill(node);
    start(node);
}

void LocalRedisGroup::pause(std::size_t node) {
    const int p = pid(node);
    if (p <= 0) throw ConfigError("node", std::to_string(node) + " is not running");
    ::kill(p, SIGSTOP);
}

void LocalRedisGroup::resume(std::size_t node) {
    const int p = pid(node);
    if (p > 0) ::kill(p, SIGCONT);
}

}  // namespace lockstep
