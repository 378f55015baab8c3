// LocalZooKeeper: zoo.cfg in a temp dir, java in its own process group, a reaper, `srvr` polling.
#include "lockstep/servers/local_zookeeper.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "child_process.h"
#include "lockstep/core/error.h"

namespace lockstep {

namespace fs = std::filesystem;
using namespace servers_detail;
using namespace std::chrono_literals;

struct LocalZooKeeper::Impl {
    LocalZooKeeperOptions options;
    bool owned = false;
    std::string external_hosts;
    fs::path dir;
    int port = 0;
    pid_t pid = 0;
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
            "cat >/dev/null; for f in \"$1\"/*.pid; do [ -f \"$f\" ] || continue; p=$(cat \"$f\"); "
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

    void write_config() {
        fs::create_directories(dir / "data");
        std::ofstream cfg(dir / "zoo.cfg");
        cfg << "tickTime=" << options.tick.count() << "\n"
            << "dataDir=" << (dir / "data").string() << "\n"
            << "clientPort=" << port << "\n"
            << "clientPortAddress=127.0.0.1\n"
            << "admin.enableServer=false\n"
            << "forceSync=" << (options.force_sync ? "yes" : "no") << "\n"
            << "minSessionTimeout=" << 2 * options.tick.count() << "\n"
            << "maxSessionTimeout=60000\n"
            << "4lw.commands.whitelist=srvr,ruok\n";
    }

    void start_process() {
        const auto t0 = std::chrono::steady_clock::now();
        // A small heap and the client compiler: the server is tiny, and JVM start dominates.
        pid = spawn({java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Dzookeeper.admin.enableServer=false",
                     "-cp", options.classpath, "org.apache.zookeeper.server.ZooKeeperServerMain", (dir / "zoo.cfg").string()},
                    (dir / "zookeeper.log").string(), (dir / "zookeeper.pid").string());
        const auto deadline = t0 + options.start_timeout;
        while (!answers_srvr("127.0.0.1", port, 500ms)) {
            int status = 0;
            if (has_exited(pid, &status)) {
                pid = 0;
                throw ConnectionError("zookeeper exited during startup: " + tail_of((dir / "zookeeper.log").string()));
            }
            if (std::chrono::steady_clock::now() > deadline) {
                kill_and_reap(pid);
                pid = 0;
                throw ConnectionError("zookeeper did not answer srvr in time: " + tail_of((dir / "zookeeper.log").string()));
            }
            std::this_thread::sleep_for(50ms);
        }
        startup = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    }

    void stop_all() noexcept {
        if (pid > 0) kill_and_reap(pid);
        pid = 0;
        if (reaper_write_fd >= 0) {
            ::close(reaper_write_fd);
            reaper_write_fd = -1;
            wait_exit(reaper_pid, 5s);
            reaper_pid = 0;
        }
    }
};

bool LocalZooKeeper::answers_srvr(const std::string& host, int port, std::chrono::milliseconds timeout) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
    bool ok = false;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        ::send(fd, "srvr", 4, MSG_NOSIGNAL) == 4) {
        std::string reply;
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
        // Before it serves, it answers "This ZooKeeper instance is not currently serving requests".
        ok = reply.rfind("Zookeeper version", 0) == 0;
    }
    ::close(fd);
    return ok;
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
    m.make_dir_and_reaper();
    try {
        m.port = free_loopback_port();
        m.write_config();
        m.owned = true;
        m.start_process();
    } catch (...) {
        m.stop_all();
        throw;
    }
}

LocalZooKeeper::~LocalZooKeeper() { impl_->stop_all(); }

std::string LocalZooKeeper::hosts() const {
    return impl_->owned ? "127.0.0.1:" + std::to_string(impl_->port) : impl_->external_hosts;
}
std::string LocalZooKeeper::url() const { return "zookeeper://" + hosts(); }
bool LocalZooKeeper::owned() const noexcept { return impl_->owned; }
int LocalZooKeeper::pid() const noexcept { return impl_->pid; }
std::chrono::milliseconds LocalZooKeeper::startup_time() const noexcept { return impl_->startup; }

void LocalZooKeeper::kill() {
    if (!impl_->owned) throw ConfigError("zookeeper", "external server: not owned, cannot kill");
    kill_and_reap(impl_->pid);
    impl_->pid = 0;
}

void LocalZooKeeper::start() {
    if (!impl_->owned) throw ConfigError("zookeeper", "external server: not owned, cannot start");
    if (impl_->pid > 0) return;
    impl_->start_process();
}

}  // namespace lockstep
