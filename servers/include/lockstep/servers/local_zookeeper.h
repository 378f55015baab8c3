// LocalZooKeeper: a private standalone ZooKeeper server (or a 3-node ensemble: ensemble_size) for
// the tests and the demo, with the
// same guarantees as LocalServers (local_servers.h): a fresh temp dir under $TMPDIR
// (lockstep-zk-XXXXXX), a free 127.0.0.1 port, and a reaper process that kills the server and
// removes the dir even if this process is SIGKILLed.
//
// The server is Debian's `zookeeper` package run directly with java (ZooKeeperServerMain, no
// init scripts, not root): zoo.cfg with clientPortAddress=127.0.0.1, the admin server off, and
// the `srvr` four-letter word allowed. It is ready when `srvr` answers with its version:
// `ruok` answers "imok" before the server serves requests. Startup costs 2-5 s of JVM start,
// so one test binary starts it once.
//
// With LOCKSTEP_ZOOKEEPER_URL set (zookeeper://host:port[,host:port]) that ensemble is used and
// not owned (kill/start throw ConfigError).
//
// Thread safety: as LocalServers.
#pragma once

#include <chrono>
#include <memory>
#include <string>

namespace lockstep {

struct LocalZooKeeperOptions {
    bool use_environment = true;
    std::string java = "java";
    // Debian's layout: the server jar and the log4j config dir.
    std::string classpath = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar";
    // Session timeouts are negotiated in [2, 20] ticks unless min/max are set (they are: 2 ticks
    // up to 60 s), so a short tick lets tests use sub-second sessions.
    std::chrono::milliseconds tick{200};
    // fsync of the transaction log before each reply. Off for tests: it changes latency, not
    // the lock protocol (docs/locks.md has both figures).
    bool force_sync = false;
    std::chrono::milliseconds start_timeout{std::chrono::seconds(60)};
    // 1: a standalone server. 3 (or any odd count up to 9): a quorum ensemble on 127.0.0.1, each
    // member with its own client, quorum and election port and its own dir under the temp dir
    // (the leader-failover test); started together, ready when every member serves.
    int ensemble_size = 1;
};

class LocalZooKeeper {
public:
    // Throws ConfigError naming scripts/install-deps when java or the jar is missing,
    // ConnectionError when the server does not answer `srvr` in time.
    explicit LocalZooKeeper(LocalZooKeeperOptions options = {});
    ~LocalZooKeeper();
    LocalZooKeeper(const LocalZooKeeper&) = delete;
    LocalZooKeeper& operator=(const LocalZooKeeper&) = delete;

    // "127.0.0.1:port[,127.0.0.1:port...]" (the C client's host list) and "zookeeper://" + that.
    std::string hosts() const;
    std::string url() const;
    bool owned() const noexcept;
    int pid() const noexcept;
    // How long the last start took until `srvr` answered.
    std::chrono::milliseconds startup_time() const noexcept;

    void kill();   // SIGKILL (every member), data dir kept
    void start();  // again, same port and data dir (the members not running)

    // The ensemble's members, 0..size()-1 (0 when not owned).
    int size() const noexcept;
    int port(int member) const;
    void kill_node(int member);   // SIGKILL one member, its data kept
    void start_node(int member);  // again; returns when it serves
    // "leader", "follower", "standalone" from `srvr`; "" when it does not answer.
    std::string mode(int member) const;
    // The member that is leader now, -1 if none answers so.
    int leader() const;

    // True if `srvr` on host:port answers with a version line within `timeout`.
    static bool answers_srvr(const std::string& host, int port, std::chrono::milliseconds timeout);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep
