#include "lockstep/servers/local_redis_sentinel.h"

#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "server_process.h"
#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"
#include "lockstep/core/uri.h"
#include "lockstep/servers/local_servers.h"
#include "redis_probe.h"

namespace lockstep {

using namespace servers_detail;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct LocalRedisSentinel::Impl {
    LocalRedisSentinelOptions options;
    fs::path config_dir;
    TlsCertificates certs;  // options.tls only, in config_dir
    std::vector<int> tls_ports;
    std::vector<std::unique_ptr<LocalServers>> nodes;

    // The node's redis-server arguments for TLS (none without options.tls).
    std::vector<std::string> tls_args() {
        if (!options.tls) return {};
        tls_ports.push_back(free_loopback_port());
        return tls_node_args(certs, tls_ports.back(), false);
    }

    LocalServers& node(std::size_t i) const {
        if (i >= nodes.size()) throw ConfigError("node", std::to_string(i) + " is not a node (0..4)");
        return *nodes[i];
    }
};

namespace {

// Sentinel answers SENTINEL MASTER with a flat array of name/value bulk strings.
bool field_is(const std::string& raw, const std::string& name, const std::string& value) {
    return raw.find("$" + std::to_string(name.size()) + "\r\n" + name + "\r\n$" + std::to_string(value.size()) +
                    "\r\n" + value + "\r\n") != std::string::npos;
}

}  // namespace

LocalRedisSentinel::LocalRedisSentinel(LocalRedisSentinelOptions options) : impl_(std::make_unique<Impl>()) {
    auto& m = *impl_;
    m.options = std::move(options);
    const LocalServersOptions base = private_redis_node(m.options.redis_server, m.options.start_timeout);

    std::string tmpl = (fs::temp_directory_path() / "lockstep-sentinel-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw ConfigError("TMPDIR", "cannot create a temp dir for sentinel configs");
    m.config_dir = tmpl;
    try {
        if (m.options.tls) m.certs = make_tls_certificates((m.config_dir / "tls").string());
        LocalServersOptions master = base;
        master.redis_extra_args = m.tls_args();
        m.nodes.push_back(std::make_unique<LocalServers>(master));
        // With TLS the replica and the sentinels reach the master on its TLS port.
        const int master_port = m.options.tls ? m.tls_ports[kMaster] : m.nodes[0]->redis_options().port;
        LocalServersOptions replica = base;
        replica.redis_extra_args = m.tls_args();
        replica.redis_extra_args.insert(replica.redis_extra_args.end(), {"--replicaof", "127.0.0.1", std::to_string(master_port)});
        m.nodes.push_back(std::make_unique<LocalServers>(replica));
        for (int i = 0; i < 3; ++i) {
            const fs::path conf = m.config_dir / ("sentinel" + std::to_string(i) + ".conf");
            std::ofstream(conf) << "sentinel monitor " << m.options.master_name << " 127.0.0.1 " << master_port << " 2\n"
                                << "sentinel down-after-milliseconds " << m.options.master_name << " "
                                << m.options.down_after.count() << "\n"
                                << "sentinel failover-timeout " << m.options.master_name << " "
                                << m.options.failover_timeout.count() << "\n";
            LocalServersOptions sentinel = base;
            sentinel.redis_config_file = conf.string();
            sentinel.redis_extra_args = {"--sentinel"};
            const auto tls = m.tls_args();
            sentinel.redis_extra_args.insert(sentinel.redis_extra_args.end(), tls.begin(), tls.end());
            m.nodes.push_back(std::make_unique<LocalServers>(sentinel));
        }
        // Ready when the replica is in sync and each sentinel knows the replica and its peers.
        const bool ready = poll_until(Clock::now() + m.options.start_timeout, std::chrono::milliseconds(50), [&] {
            bool all = info_value(redis_probe(port(kReplica), {"INFO", "replication"}), "master_link_status") == "up";
            for (std::size_t s = kFirstSentinel; s < m.nodes.size() && all; ++s) {
                const std::string raw = redis_probe(port(s), {"SENTINEL", "MASTER", m.options.master_name});
                all = field_is(raw, "num-slaves", "1") && field_is(raw, "num-other-sentinels", "2");
            }
            return all;
        });
        if (!ready) throw ConnectionError("the local Sentinel setup did not become ready in time");
    } catch (...) {
        m.nodes.clear();
        std::error_code ec;
        fs::remove_all(m.config_dir, ec);
        throw;
    }
    logger()->info("private Redis Sentinel setup: {}", url());
}

LocalRedisSentinel::~LocalRedisSentinel() {
    for (auto& n : impl_->nodes) {
        if (n->redis_pid() > 0) ::kill(n->redis_pid(), SIGCONT);
    }
    impl_->nodes.clear();
    std::error_code ec;
    fs::remove_all(impl_->config_dir, ec);
}

std::string LocalRedisSentinel::url() const {
    const bool tls = impl_->options.tls;
    std::string url = tls ? "rediss+sentinel://" : "redis+sentinel://";
    for (std::size_t s = kFirstSentinel; s < impl_->nodes.size(); ++s) {
        url += (s > kFirstSentinel ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(tls ? tls_port(s) : port(s));
    }
    url += "/" + impl_->options.master_name;
    if (tls) url += "?tls_ca=" + impl_->certs.ca_file;
    return url;
}

int LocalRedisSentinel::tls_port(std::size_t node) const {
    impl_->node(node);
    if (!impl_->options.tls) throw ConfigError("tls", "this setup serves no TLS (LocalRedisSentinelOptions::tls)");
    return impl_->tls_ports[node];
}

const TlsCertificates& LocalRedisSentinel::tls_certificates() const {
    if (!impl_->options.tls) throw ConfigError("tls", "this setup serves no TLS (LocalRedisSentinelOptions::tls)");
    return impl_->certs;
}

RedisOptions LocalRedisSentinel::redis_options() const { return parse_redis_url(url()); }
std::size_t LocalRedisSentinel::size() const noexcept { return impl_->nodes.size(); }
int LocalRedisSentinel::port(std::size_t node) const { return impl_->node(node).redis_options().port; }
int LocalRedisSentinel::pid(std::size_t node) const { return impl_->node(node).redis_pid(); }
void LocalRedisSentinel::kill(std::size_t node) { impl_->node(node).kill_redis(); }
void LocalRedisSentinel::start(std::size_t node) { impl_->node(node).start_redis(); }

void LocalRedisSentinel::pause(std::size_t node) {
    const int p = pid(node);
    if (p <= 0) throw ConfigError("node", std::to_string(node) + " is not running");
    ::kill(p, SIGSTOP);
}

void LocalRedisSentinel::resume(std::size_t node) {
    const int p = pid(node);
    if (p > 0) ::kill(p, SIGCONT);
}

int LocalRedisSentinel::master_port_by_sentinels() const {
    for (std::size_t s = kFirstSentinel; s < impl_->nodes.size(); ++s) {
        if (pid(s) <= 0) continue;
        // *2\r\n$9\r\n127.0.0.1\r\n$5\r\n31300\r\n
        const std::string raw = redis_probe(port(s), {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", impl_->options.master_name});
        const auto last_len = raw.rfind('$');
        if (raw.empty() || raw[0] != '*' || last_len == std::string::npos) continue;
        const auto eol = raw.find("\r\n", last_len);
        if (eol == std::string::npos) continue;
        return std::stoi(raw.substr(eol + 2));
    }
    return 0;
}

}  // namespace lockstep
