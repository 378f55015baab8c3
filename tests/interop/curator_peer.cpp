#include "curator_peer.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "lockstep/core/error.h"

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

namespace {

std::vector<std::string> java_argv(const std::string& zk_hosts, std::chrono::milliseconds session_timeout,
                                   const std::string& lock_path, const std::string& kind) {
    return {"java",
            "-Xmx128m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-cp",
            jar_classpath() + class_dir(),
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=off",
            "CuratorPeer",
            zk_hosts,
            std::to_string(session_timeout.count()),
            lock_path,
            kind};
}

}  // namespace

CuratorPeer::CuratorPeer(const std::string& zk_hosts, std::chrono::milliseconds session_timeout,
                         const std::string& lock_path, const std::string& kind)
    : java_(java_argv(zk_hosts, session_timeout, lock_path, kind), {}, "java") {
    auto ready = next_line(std::chrono::seconds(60));
    if (!ready || *ready != "ready") throw std::runtime_error("CuratorPeer did not start: " + ready.value_or("(nothing)"));
}

CuratorPeer::~CuratorPeer() {
    // Asked to exit, the peer closes its session; one that does not within 5 s is SIGKILLed by
    // ~ChildProcess. A killed peer is already reaped: wait_for returns at once.
    if (!java_.wait_for(std::chrono::milliseconds(0))) {
        send("exit");
        java_.wait_for(std::chrono::seconds(5));
    }
}

void CuratorPeer::send(const std::string& command) {
    try {
        java_.send(command);
    } catch (const Error&) {
        // The peer is gone (killed): later reads say so.
    }
}

std::optional<std::string> CuratorPeer::next_line(std::chrono::milliseconds timeout) {
    return java_.read_line(timeout);
}

std::string CuratorPeer::ask(const std::string& command) {
    send(command);
    auto line = next_line();
    if (!line) throw std::runtime_error("CuratorPeer: no answer to '" + command + "'");
    return *line;
}

void CuratorPeer::kill() {
    java_.signal(SIGKILL);
    java_.wait();
}

}  // namespace lockstep::test
