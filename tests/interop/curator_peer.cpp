#include "curator_peer.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <vector>

namespace lockstep::test {

namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kJars = {
    "curator-client", "curator-framework", "curator-recipes", "zookeeper", "zookeeper-jute", "guava", "slf4j-api",
    "netty-handler", "netty-transport", "netty-common", "netty-buffer", "netty-codec", "netty-resolver",
    "netty-transport-native-epoll", "netty-transport-native-unix-common", "slf4j-nop"};

std::string jar_classpath() {
    std::string cp;
    for (const auto& jar : kJars) cp += "/usr/share/java/" + jar + ".jar:";
    return cp;
}

std::string missing_jar() {
    for (const auto& jar : kJars) {
        if (!fs::exists("/usr/share/java/" + jar + ".jar")) return jar;
    }
    return {};
}

// The compiled peer's class dir, made once per process and removed at exit. Never destroyed
// itself: the exit handler that removes the dir runs after static destructors would have.
const std::string& class_dir() {
    static const std::string* dir = [] {
        const char* tmp = std::getenv("TMPDIR");
        auto* d = new std::string(std::string(tmp ? tmp : "/tmp") + "/lockstep-curator-" + std::to_string(getpid()));
        fs::create_directories(*d);
        std::atexit([] {
            std::error_code ec;
            fs::remove_all(class_dir(), ec);
        });
        const std::string cmd = "javac -nowarn -d '" + *d + "' -cp '" + jar_classpath() + "' '" +
                                LOCKSTEP_CURATOR_PEER_SOURCE + "' 2>&1";
        if (std::system(cmd.c_str()) != 0) throw std::runtime_error("javac failed on CuratorPeer.java");
        return d;
    }();
    return *dir;
}

}  // namespace

std::string CuratorPeer::unavailable_reason() {
    if (std::system("command -v javac >/dev/null 2>&1") != 0) return "javac not found (scripts/install-deps --tests)";
    if (auto jar = missing_jar(); !jar.empty()) return "/usr/share/java/" + jar + ".jar missing (scripts/install-deps --tests)";
    return {};
}

CuratorPeer::CuratorPeer(const std::string& zk_hosts, std::chrono::milliseconds session_timeout,
                         const std::string& lock_path, const std::string& kind) {
    const std::string classpath = jar_classpath() + class_dir();
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        const std::string timeout = std::to_string(session_timeout.count());
        execlp("java", "java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", classpath.c_str(),
               "-Dorg.slf4j.simpleLogger.defaultLogLevel=off", "CuratorPeer", zk_hosts.c_str(), timeout.c_str(),
               lock_path.c_str(), kind.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_child_ = in[1];
    from_child_ = out[0];
    auto ready = next_line(std::chrono::seconds(60));
    if (!ready || *ready != "ready") throw std::runtime_error("CuratorPeer did not start: " + ready.value_or("(nothing)"));
}

CuratorPeer::~CuratorPeer() {
    if (pid_ > 0) {
        send("exit");
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        int status = 0;
        while (waitpid(pid_, &status, WNOHANG) == 0) {
            if (std::chrono::steady_clock::now() > deadline) {
                ::kill(pid_, SIGKILL);
                waitpid(pid_, &status, 0);
                break;
            }
            usleep(10000);
        }
    }
    if (to_child_ >= 0) close(to_child_);
    if (from_child_ >= 0) close(from_child_);
}

void CuratorPeer::send(const std::string& command) {
    const std::string line = command + "\n";
    if (write(to_child_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
        // The peer is gone (killed): later reads say so.
    }
}

std::optional<std::string> CuratorPeer::next_line(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        if (auto nl = buffer_.find('\n'); nl != std::string::npos) {
            std::string line = buffer_.substr(0, nl);
            buffer_.erase(0, nl + 1);
            return line;
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return std::nullopt;
        pollfd p{from_child_, POLLIN, 0};
        if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
        char chunk[512];
        const ssize_t n = read(from_child_, chunk, sizeof chunk);
        if (n <= 0) return std::nullopt;
        buffer_.append(chunk, static_cast<std::size_t>(n));
    }
}

std::string CuratorPeer::ask(const std::string& command) {
    send(command);
    auto line = next_line();
    if (!line) throw std::runtime_error("CuratorPeer: no answer to '" + command + "'");
    return *line;
}

void CuratorPeer::kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
}

}  // namespace lockstep::test
