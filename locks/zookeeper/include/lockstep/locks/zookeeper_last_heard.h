// ZooKeeperLastHeard: when a ZooKeeper client last heard from the ensemble, as the send time of
// the newest request the ensemble answered (a reply proves the server heard the client at or
// after the send). The ensemble expires a session T (the negotiated session timeout) after it
// last heard from the client, so a hold tied to the session is valid until last_heard + T − drift,
// whenever the client library's own I/O thread gets round to declaring the connection lost (on a
// starved machine that declaration comes late; RACES L11). The holder keeps it fresh with a cheap
// asynchronous exists() of its own every T/3 or so (probe()).
//
// Internal to lockstep: shared by the ZooKeeper lock backend and the ZooKeeper semaphore
// (coordination/), which sees the backend's include/ directory but not its src/. Not part of
// the API.
//
// Thread safety: every member may be called from any thread, and on_heard runs on the client
// library's completion thread; no on_heard runs once stop() (or the destructor) returned.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

typedef struct _zhandle zhandle_t;  // zookeeper.h's handle, opaque here

namespace lockstep::locks_detail {

class ZooKeeperLastHeard {
public:
    using Clock = std::chrono::steady_clock;

    // on_heard: called after a probe's reply moved last_heard() on, on the client's completion
    // thread (so it must not call the client synchronously), with no lock of this class but the
    // one stop() waits for held.
    explicit ZooKeeperLastHeard(std::function<void()> on_heard = {});
    ~ZooKeeperLastHeard();
    ZooKeeperLastHeard(const ZooKeeperLastHeard&) = delete;
    ZooKeeperLastHeard& operator=(const ZooKeeperLastHeard&) = delete;

    // A new handle, generation `generation`, whose handshake is sent after `before_init` (the
    // time just before zookeeper_init): the session cannot expire before before_init + T.
    // Replies to probes of older generations are ignored from now on.
    void restart(Clock::time_point before_init, std::uint64_t generation);
    // Sends one exists(`path`) through `zh`, the handle of `generation`, without waiting; its
    // reply moves last_heard() to the send time. A request the client queues while it
    // reconnects is sent later than recorded: an earlier time, so a shorter bound, never a later.
    void probe(zhandle_t* zh, const std::string& path, std::uint64_t generation);
    Clock::time_point last_heard() const;
    // last_heard() + timeout − margin: until then the ensemble keeps the session.
    Clock::time_point kept_until(std::chrono::milliseconds timeout, Clock::duration margin) const;
    // No on_heard runs after this returns (a running one is waited for).
    void stop();

    struct Shared;

private:
    std::shared_ptr<Shared> shared_;  // also owned by every probe in flight
};

}  // namespace lockstep::locks_detail
