#include "lockstep/servers/local_redis_cluster.h"

#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

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

struct LocalRedisCluster::Impl {
    LocalRedisClusterOptions options;
    fs::path tls_dir;          // options.tls: the certificates, removed by the destructor
    TlsCertificates certs;     // options.tls only
    std::vector<int> tls_ports;
    std::vector<std::unique_ptr<LocalServers>> nodes;

    ~Impl() {
        nodes.clear();
        std::error_code ec;
        if (!tls_dir.empty()) fs::remove_all(tls_dir, ec);
    }
    LocalServers& node(std::size_t i) const {
        if (i >= nodes.size()) {
            throw ConfigError("node", std::to_string(i) + " is not a node of this " +
                                          std::to_string(nodes.size()) + "-node cluster");
        }
        return *nodes[i];
    }
    void create_cluster();
};

namespace {

// The bulk-string payload of a raw reply ("$n\r\n<payload>\r\n"), or "".
std::string bulk_payload(const std::string& raw) {
    if (raw.empty() || raw[0] != '$') return {};
    const auto eol = raw.find("\r\n");
    return raw.substr(eol + 2, raw.size() >= eol + 4 ? raw.size() - eol - 4 : 0);
}

}  // namespace

// redis-cli does the slot assignment, the MEET handshake and the replica assignment, and waits
// until the configuration is consistent; we then wait until every node says ok and every
// replica has finished its first sync, so a test's first write is replicated.
void LocalRedisCluster::Impl::create_cluster() {
    const std::string cli = find_executable(options.redis_cli);
    if (cli.empty()) {
        throw ConfigError(options.redis_cli, "'" + options.redis_cli +
                                                 "' not found on PATH; run scripts/install-deps (it installs redis-tools)");
    }
    std::vector<std::string> argv = {cli, "--cluster", "create"};
    for (const auto& n : nodes) argv.push_back("127.0.0.1:" + std::to_string(n->redis_options().port));
    argv.insert(argv.end(), {"--cluster-replicas", std::to_string(options.replicas_per_master), "--cluster-yes"});
    fs::path base = fs::temp_directory_path();
    std::string tmpl = (base / "lockstep-cluster-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw ConfigError("TMPDIR", "cannot create a temp dir under " + base.string());
    const fs::path dir = tmpl;
    const std::string log = (dir / "create.log").string();
    const pid_t pid = spawn(argv, log, (dir / "create.pid").string());
    const int code = wait_exit(pid, options.start_timeout);
    const std::string tail = tail_of(log, 12);
    std::error_code ec;
    fs::remove_all(dir, ec);
    if (code != 0) throw ConnectionError("redis-cli --cluster create failed (exit " + std::to_string(code) + "):" + tail);
}

LocalRedisCluster::LocalRedisCluster(LocalRedisClusterOptions options) : impl_(std::make_unique<Impl>()) {
    auto& m = *impl_;
    m.options = std::move(options);
    if (m.options.masters < 3) throw ConfigError("masters", "Redis Cluster needs at least 3 masters");
    if (m.options.replicas_per_master < 0) throw ConfigError("replicas_per_master", "must not be negative");
    const int total = m.options.masters * (1 + m.options.replicas_per_master);
    LocalServersOptions node_options = private_redis_node(m.options.redis_server, m.options.start_timeout);
    node_options.redis_extra_args = {
        "--cluster-enabled", "yes",
        "--cluster-config-file", "nodes.conf",  // in the node's own dir (redis-server chdirs there)
        "--cluster-node-timeout", std::to_string(m.options.node_timeout.count()),
        // A replica whose link was down for a while may still take over: tests kill masters
        // right after partitioning them, and availability is what they measure.
        "--cluster-replica-validity-factor", "0",
    };
    if (m.options.tls) {
        std::string tmpl = (fs::temp_directory_path() / "lockstep-cluster-tls-XXXXXX").string();
        if (::mkdtemp(tmpl.data()) == nullptr) throw ConfigError("TMPDIR", "cannot create a temp dir for certificates");
        m.tls_dir = tmpl;
        m.certs = make_tls_certificates(m.tls_dir.string());
    }
    for (int i = 0; i < total; ++i) {
        // The bus port defaults to port + 10000, which may be taken or past 65535: pick one.
        LocalServersOptions o = node_options;
        o.redis_extra_args.insert(o.redis_extra_args.end(), {"--cluster-port", std::to_string(free_loopback_port())});
        if (m.options.tls) {
            m.tls_ports.push_back(free_loopback_port());
            const auto args = tls_node_args(m.certs, m.tls_ports.back(), true);
            o.redis_extra_args.insert(o.redis_extra_args.end(), args.begin(), args.end());
        }
        m.nodes.push_back(std::make_unique<LocalServers>(o));
    }
    m.create_cluster();
    if (!wait_until_ok(m.options.start_timeout)) {
        throw ConnectionError("the local Redis Cluster did not reach cluster_state:ok within " +
                              std::to_string(m.options.start_timeout.count()) + " ms");
    }
    logger()->info("private Redis Cluster: {}", url());
}

LocalRedisCluster::~LocalRedisCluster() {
    // A paused node would ignore nothing (SIGKILL works on stopped processes), but resume anyway
    // so its LocalServers' stop path never waits on a stopped process.
    for (auto& n : impl_->nodes) {
        if (n->redis_pid() > 0) ::kill(n->redis_pid(), SIGCONT);
    }
}

std::string LocalRedisCluster::url() const {
    const bool tls = impl_->options.tls;
    std::string url = tls ? "rediss+cluster://" : "redis+cluster://";
    for (std::size_t i = 0; i < impl_->nodes.size(); ++i) {
        url += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(tls ? impl_->tls_ports[i] : port(i));
    }
    if (tls) url += "?tls_ca=" + impl_->certs.ca_file;
    return url;
}

int LocalRedisCluster::tls_port(std::size_t node) const {
    impl_->node(node);
    if (!impl_->options.tls) throw ConfigError("tls", "this cluster serves no TLS (LocalRedisClusterOptions::tls)");
    return impl_->tls_ports[node];
}

const TlsCertificates& LocalRedisCluster::tls_certificates() const {
    if (!impl_->options.tls) throw ConfigError("tls", "this cluster serves no TLS (LocalRedisClusterOptions::tls)");
    return impl_->certs;
}

RedisOptions LocalRedisCluster::redis_options() const { return parse_redis_url(url()); }

std::size_t LocalRedisCluster::size() const noexcept { return impl_->nodes.size(); }
int LocalRedisCluster::port(std::size_t node) const { return impl_->node(node).redis_options().port; }
int LocalRedisCluster::pid(std::size_t node) const { return impl_->node(node).redis_pid(); }
void LocalRedisCluster::kill(std::size_t node) { impl_->node(node).kill_redis(); }
void LocalRedisCluster::start(std::size_t node) { impl_->node(node).start_redis(); }
void LocalRedisCluster::restart(std::size_t node) { impl_->node(node).restart_redis(); }

void LocalRedisCluster::pause(std::size_t node) {
    const int p = pid(node);
    if (p <= 0) throw ConfigError("node", std::to_string(node) + " is not running");
    ::kill(p, SIGSTOP);
}

void LocalRedisCluster::resume(std::size_t node) {
    const int p = pid(node);
    if (p > 0) ::kill(p, SIGCONT);
}

std::vector<std::size_t> LocalRedisCluster::masters() const {
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < impl_->nodes.size(); ++i) {
        if (pid(i) <= 0) continue;
        if (info_value(bulk_payload(redis_probe(port(i), {"INFO", "replication"})), "role") == "master") out.push_back(i);
    }
    return out;
}

int LocalRedisCluster::master_of_slot(int slot) const {
    for (std::size_t i = 0; i < impl_->nodes.size(); ++i) {
        if (pid(i) <= 0) continue;
        const std::string text = bulk_payload(redis_probe(port(i), {"CLUSTER", "NODES"}));
        if (text.empty()) continue;
        std::istringstream lines(text);
        std::string line;
        while (std::getline(lines, line)) {
            std::istringstream fields(line);
            std::string id, address, flags, master, ping, pong, epoch, link, range;
            fields >> id >> address >> flags >> master >> ping >> pong >> epoch >> link;
            if (flags.find("master") == std::string::npos || flags.find("fail") != std::string::npos) continue;
            while (fields >> range) {
                if (range.empty() || range[0] == '[') continue;
                const auto dash = range.find('-');
                const int lo = std::stoi(range.substr(0, dash));
                const int hi = dash == std::string::npos ? lo : std::stoi(range.substr(dash + 1));
                if (slot < lo || slot > hi) continue;
                const int node_port = std::stoi(address.substr(address.rfind(':') + 1));
                for (std::size_t j = 0; j < impl_->nodes.size(); ++j) {
                    if (port(j) == node_port) return static_cast<int>(j);
                }
            }
        }
        return -1;
    }
    return -1;
}

bool LocalRedisCluster::wait_until_ok(std::chrono::milliseconds timeout) const {
    return poll_until(Clock::now() + timeout, std::chrono::milliseconds(20), [&] {
        bool ok = true;
        for (std::size_t i = 0; i < impl_->nodes.size() && ok; ++i) {
            if (pid(i) <= 0) continue;
            const std::string info = bulk_payload(redis_probe(port(i), {"CLUSTER", "INFO"}));
            ok = info_value(info, "cluster_state") == "ok";
            if (ok) {
                // A replica counts once its first sync is done (its writes are then replicated).
                const std::string repl = bulk_payload(redis_probe(port(i), {"INFO", "replication"}));
                ok = info_value(repl, "role") == "master" || info_value(repl, "master_link_status") == "up";
            }
        }
        return ok;
    });
}

}  // namespace lockstep
