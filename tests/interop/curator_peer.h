// CuratorPeer: a Java process (CuratorPeer.java) that takes one lock with Apache Curator's
// recipes, driven over its stdin/stdout, so a test can interleave it with lockstep's ZooKeeper
// locks step by step. The Java source is compiled once per test binary into a temp dir (javac
// and the Debian Curator jars: scripts/install-deps --tests); a missing JDK or jar is a skip
// reason (available()), never a silent pass.
//
// Thread safety: one thread drives a peer.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>

namespace lockstep::test {

class CuratorPeer {
public:
    // Empty when the peer can run here; otherwise why not (no javac, no Curator jars).
    static std::string unavailable_reason();

    // kind: "mutex", "read" or "write". Returns once the peer's session is connected.
    CuratorPeer(const std::string& zk_hosts, std::chrono::milliseconds session_timeout, const std::string& lock_path,
                const std::string& kind);
    ~CuratorPeer();  // "exit", then SIGKILL if it does not end within 5 s
    CuratorPeer(const CuratorPeer&) = delete;
    CuratorPeer& operator=(const CuratorPeer&) = delete;

    void send(const std::string& command);
    // The next line the peer prints, or nullopt when none comes within `timeout`.
    std::optional<std::string> next_line(std::chrono::milliseconds timeout = std::chrono::seconds(20));
    // send(command), then next_line(); throws std::runtime_error on no answer.
    std::string ask(const std::string& command);
    // SIGKILL: the session is not closed, so its ephemeral nodes stay until the session expires.
    void kill();

private:
    pid_t pid_ = -1;
    int to_child_ = -1;
    int from_child_ = -1;
    std::string buffer_;
};

}  // namespace lockstep::test
