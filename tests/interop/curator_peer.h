// CuratorPeer: a Java process (CuratorPeer.java) that takes one lock with Apache Curator's
// recipes, driven over its stdin/stdout (a lockstep::testing::ChildProcess running `java`), so a
// test can interleave it with lockstep's ZooKeeper locks step by step. The Java source is compiled
// once per test binary into a temp dir (javac and the Debian Curator jars: scripts/install-deps
// --tests); a missing JDK or jar is a skip reason (available()), never a silent pass.
//
// Thread safety: one thread drives a peer.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "lockstep/servers/child_process.h"

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

    // Writes a command line; a peer that is gone (killed) ignores it, and the next read says so.
    void send(const std::string& command);
    // The next line the peer prints, or nullopt when none comes within `timeout`.
    std::optional<std::string> next_line(std::chrono::milliseconds timeout = std::chrono::seconds(20));
    // send(command), then next_line(); throws std::runtime_error on no answer.
    std::string ask(const std::string& command);
    // SIGKILL: the session is not closed, so its ephemeral nodes stay until the session expires.
    void kill();

private:
    lockstep::testing::ChildProcess java_;
};

}  // namespace lockstep::test
