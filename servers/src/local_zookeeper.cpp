// LocalZooKeeper: zoo.cfg in a temp dir, java in its own process group, a reaper, `srvr` polling.
#include "lockstep/servers/local_zookeeper.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "server_process.h"
#include "lockstep/core/error.h"

namespace lockstep {

namespace fs = std::filesystem;
using namespace servers_detail;
using namespace std::chrono_literals;

struct LocalZooKeeper::Impl {
    // One server of the ensemble (one of one when standalone): its own dir (zoo.cfg, data/myid,
    // log, pid file) under the shared temp dir, its client port and, in an ensemble, its quorum
    // and election ports. All ports free on 127.0.0.1.
    struct Node {
        fs::path dir;
        int port = 0;
        int peer_port = 0;
        int election_port = 0;
        pid_t pid = 0;
    };
    LocalZooKeeperOptions options;
    bool owned = false;
    std::string external_hosts;
    fs::path dir;
    std::vector<Node> nodes;
    int reaper_write_fd = -1;
    pid_t reaper_pid = 0;
    std::string java;
    std::chrono::milliseconds startup{0};

    // The reaper (as LocalServers'): blocks on a pipe only we can write; at EOF (we died, or the
    // destructor closed it) it kills every process group whose pid file is in the dir, and
    // removes the dir.
    void make_dir_and_reaper() {
        fs::path base;
        try {
            base = fs::temp_directory_path();
        } catch (const fs::filesystem_error&) {
            base = "/tmp";
        }
        std::string tmpl = (base / "lockstep-zk-XXXXXX").string();
        if (::mkdtemp(tmpl.data()) == nullptr) {
            throw ConfigError("TMPDIR", "cannot create a temp dir under " + base.string() + ": " + std::strerror(errno));
        }
        dir = tmpl;
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0) throw ConnectionError(std::string("pipe2: ") + std::strerror(errno));
        std::string script =
            "cat >/dev/null; for f in \"$1\"/*.pid \"$1\"/*/*.pid; do [ -f \"$f\" ] || continue; p=$(cat \"$f\"); "
            "kill -9 -\"$p\" 2>/dev/null; kill -9 \"$p\" 2>/dev/null; done; rm -rf \"$1\"";
        std::vector<std::string> argv = {"/bin/sh", "-c", script, "lockstep-reaper", dir.string()};
        std::vector<char*> args;
        for (auto& a : argv) args.push_back(a.data());
        args.push_back(nullptr);
        const pid_t p = ::fork();
        if (p < 0) throw ConnectionError(std::string("fork: ") + std::strerror(errno));
        if (p == 0) {
            ::setsid();
            ::dup2(fds[0], 0);
            ::execv(args[0], args.data());
            _exit(127);
        }
        ::close(fds[0]);
        reaper_write_fd = fds[1];
        reaper_pid = p;
    }

    void write_config(std::size_t i) {
        const Node& n = nodes[i];
        fs::create_directories(n.dir / "data");
        std::ofstream cfg(n.dir / "zoo.cfg");
        cfg << "tickTime=" << options.tick.count() << "\n"
            << "dataDir=" << (n.dir / "data").string() << "\n"
            << "clientPort=" << n.port << "\n"
            << "clientPortAddress=127.0.0.1\n"
            << "admin.enableServer=false\n"
            << "forceSync=" << (options.force_sync ? "yes" : "no") << "\n"
            << "minSessionTimeout=" << 2 * options.tick.count() << "\n"
            << "maxSessionTimeout=60000\n"
            << "4lw.commands.whitelist=srvr,ruok\n";
        if (nodes.size() > 1) {
            // A quorum ensemble: every member listed; initLimit/syncLimit in ticks (a follower
            // has 2 s to sync with a new leader at 200 ms ticks).
            cfg << "initLimit=10\nsyncLimit=5\n";
            for (std::size_t k = 0; k < nodes.size(); ++k) {
                cfg << "server." << k + 1 << "=127.0.0.1:" << nodes[k].peer_port << ":" << nodes[k].election_port << "\n";
            }
            std::ofstream(n.dir / "data" / "myid") << i + 1 << "\n";
        }
    }

    // Starts the servers not running (every one at first); returns when all answer `srvr`
    // (an ensemble member answers only once it has a quorum and a leader).
    void start_processes() {
        const auto t0 = std::chrono::steady_clock::now();
        for (std::size_t i = 0; i < nodes.size(); ++i) {
            if (nodes[i].pid <= 0) spawn_node(i);
        }
        for (std::size_t i = 0; i < nodes.size(); ++i) wait_serving(i, t0);
        startup = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    }

    void spawn_node(std::size_t i) {
        Node& n = nodes[i];
        // A small heap and the client compiler: the server is tiny, and JVM start dominates.
        // Standalone: ZooKeeperServerMain; a member of an ensemble: QuorumPeerMain.
        const char* main_class = nodes.size() > 1 ? "org.apache.zookeeper.server.quorum.QuorumPeerMain"
                                                  : "org.apache.zookeeper.server.ZooKeeperServerMain";
        n.pid = spawn({java, nodes.size() > 1 ? "-Xmx128m" : "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                       "-Dzookeeper.admin.enableServer=false", "-cp", options.classpath, main_class,
                       (n.dir / "zoo.cfg").string()},
                      (n.dir / "zookeeper.log").string(), (n.dir / "zookeeper.pid").string());
    }

    void wait_serving(std::size_t i, std::chrono::steady_clock::time_point t0) {
        Node& n = nodes[i];
        const auto deadline = t0 + options.start_timeout;
        while (!answers_srvr("127.0.0.1", n.port, 500ms)) {
            int status = 0;
            if (has_exited(n.pid, &status)) {
                n.pid = 0;
                throw ConnectionError("zookeeper exited during startup: " + tail_of((n.dir / "zookeeper.log").string()));
            }
            if (std::chrono::steady_clock::now() > deadline) {
                throw ConnectionError("zookeeper did not answer srvr in time: " + tail_of((n.dir / "zookeeper.log").string()));
            }
            std::this_thread::sleep_for(50ms);
        }
    }

    void stop_all() noexcept {
        for (auto& n : nodes) {
            if (n.pid > 0) kill_and_reap(n.pid);
            n.pid = 0;
        }
        if (reaper_write_fd >= 0) {
            ::close(reaper_write_fd);
            reaper_write_fd = -1;
            wait_exit(reaper_pid, 5s);
            reaper_pid = 0;
        }
    }
};

namespace {

// The `srvr` reply of host:port ("" if none within `timeout`).
std::string srvr(const std::string& host, int port, std::chrono::milliseconds timeout) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return {};
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
    std::string reply;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        ::send(fd, "srvr", 4, MSG_NOSIGNAL) == 4) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        for (;;) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) break;
            pollfd p{fd, POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
            char buf[256];
            const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
            if (n <= 0) break;
            reply.append(buf, static_cast<std::size_t>(n));
        }
    }
    ::close(fd);
    return reply;
}

}  // namespace

bool LocalZooKeeper::answers_srvr(const std::string& host, int port, std::chrono::milliseconds timeout) {
    // Before it serves, it answers "This ZooKeeper instance is not currently serving requests".
    return srvr(host, port, timeout).rfind("Zookeeper version", 0) == 0;
}

LocalZooKeeper::LocalZooKeeper(LocalZooKeeperOptions options) : impl_(std::make_unique<Impl>()) {
    auto& m = *impl_;
    m.options = std::move(options);
    if (m.options.use_environment) {
        if (const char* url = std::getenv("LOCKSTEP_ZOOKEEPER_URL"); url && *url) {
            std::string u = url;
            const std::string scheme = "zookeeper://";
            if (u.rfind(scheme, 0) != 0) throw ConfigError("LOCKSTEP_ZOOKEEPER_URL", "must start with zookeeper://");
            m.external_hosts = u.substr(scheme.size());
            return;
        }
    }
    m.java = find_executable(m.options.java);
    if (m.java.empty()) throw ConfigError("java", "not found; run scripts/install-deps (it installs zookeeper and a headless JRE)");
    const std::string jar = "/usr/share/java/zookeeper.jar";
    if (m.options.classpath.find(jar) != std::string::npos && !fs::exists(jar)) {
        throw ConfigError("zookeeper", jar + " not found; run scripts/install-deps");
    }
    if (m.options.ensemble_size < 1 || m.options.ensemble_size > 9) {
        throw ConfigError("ensemble_size", "must be 1..9");
    }
    m.make_dir_and_reaper();
    try {
        m.nodes.resize(static_cast<std::size_t>(m.options.ensemble_size));
        std::vector<int> taken;
        auto distinct_port = [&] {  // free now, and not handed to another member already
            for (;;) {
                const int p = free_loopback_port();
                if (std::find(taken.begin(), taken.end(), p) == taken.end()) {
                    taken.push_back(p);
                    return p;
                }
            }
        };
        for (std::size_t i = 0; i < m.nodes.size(); ++i) {
            auto& n = m.nodes[i];
            n.dir = m.nodes.size() > 1 ? m.dir / ("node" + std::to_string(i + 1)) : m.dir;
            n.port = distinct_port();
            if (m.nodes.size() > 1) {
                n.peer_port = distinct_port();
                n.election_port = distinct_port();
            }
        }
        for (std::size_t i = 0; i < m.nodes.size(); ++i) m.write_config(i);
        m.owned = true;
        m.start_processes();
    } catch (...) {
        m.stop_all();
        throw;
    }
}

LocalZooKeeper::~LocalZooKeeper() { impl_->stop_all(); }

std::string LocalZooKeeper::hosts() const {
    if (!impl_->owned) return impl_->external_hosts;
    std::string out;
    for (const auto& n : impl_->nodes) out += (out.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(n.port);
    return out;
}
std::string LocalZooKeeper::url() const { return "zookeeper://" + hosts(); }
bool LocalZooKeeper::owned() const noexcept { return impl_->owned; }
int LocalZooKeeper::pid() const noexcept { return impl_->nodes.empty() ? 0 : impl_->nodes[0].pid; }
std::chrono::milliseconds LocalZooKeeper::startup_time() const noexcept { return impl_->startup; }

void LocalZooKeeper::kill() {
    if (!impl_->owned) throw ConfigError("zookeeper", "external server: not owned, cannot kill");
    for (std::size_t i = 0; i < impl_->nodes.size(); ++i) kill_node(static_cast<int>(i));
}

void LocalZooKeeper::start() {
    if (!impl_->owned) throw ConfigError("zookeeper", "external server: not owned, cannot start");
    impl_->start_processes();
}

int LocalZooKeeper::size() const noexcept { return impl_->owned ? static_cast<int>(impl_->nodes.size()) : 0; }

int LocalZooKeeper::port(int i) const {
    if (!impl_->owned || i < 0 || i >= size()) throw ConfigError("zookeeper node", "no node " + std::to_string(i));
    return impl_->nodes[static_cast<std::size_t>(i)].port;
}

void LocalZooKeeper::kill_node(int i) {
    port(i);  // checks i
    auto& n = impl_->nodes[static_cast<std::size_t>(i)];
    if (n.pid > 0) kill_and_reap(n.pid);
    n.pid = 0;
}

void LocalZooKeeper::start_node(int i) {
    port(i);
    auto& n = impl_->nodes[static_cast<std::size_t>(i)];
    if (n.pid > 0) return;
    impl_->spawn_node(static_cast<std::size_t>(i));
    impl_->wait_serving(static_cast<std::size_t>(i), std::chrono::steady_clock::now());
}

std::string LocalZooKeeper::mode(int i) const {
    port(i);  // checks i
    const auto& n = impl_->nodes[static_cast<std::size_t>(i)];
    if (n.pid <= 0) return "";
    const std::string reply = srvr("127.0.0.1", n.port, 1000ms);
    const auto at = reply.find("Mode: ");
    if (at == std::string::npos) return "";
    const auto end = reply.find('\n', at);
    return reply.substr(at + 6, end == std::string::npos ? std::string::npos : end - at - 6);
}

int LocalZooKeeper::leader() const {
    for (int i = 0; i < size(); ++i) {
        if (mode(i) == "leader") return i;
    }
    return -1;
}

}  // namespace lockstep
