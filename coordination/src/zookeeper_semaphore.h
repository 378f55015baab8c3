// The ZooKeeper side of Semaphore (lease nodes, Curator InterProcessSemaphoreV2's shape): under
// <root>/<prefix><name>#sem every acquisition creates an EPHEMERAL_SEQUENTIAL node
// "lease-<guid>-<seq>"; a node holds a permit while it is among the first N children by sequence
// (FIFO). Waiters watch the children and look again on every change. The node lives as long as
// the client's ZooKeeper session: a killed holder's permit frees when its session expires.
//
// Thread safety: every member may be called from any thread. It owns its own client handle (one
// session), opened lazily and replaced after an expiry.
#pragma once
#ifdef LOCKSTEP_HAVE_ZOOKEEPER

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "lockstep/locks/lock_service.h"
#include "lockstep/locks/zookeeper_lock_service.h"

namespace lockstep::detail {

struct ZkHandle;

struct ZkLease {
    std::string path;       // full path of the lease node
    FenceToken czxid = 0;   // the create's zxid: the permit's fencing token
    std::uint64_t session = 0;  // generation of the session that owns the node
};

// How the sessions stand, for the semaphore's watchdog.
struct ZkSessionHealth {
    std::uint64_t session = 0;  // generation of the current session (0: none opened yet)
    bool expired = false;       // the current session expired (its lease nodes are gone)
    bool unreachable = false;   // disconnected past T/3, or silent for T (session_bound)
};

class ZooKeeperSemaphore {
public:
    ZooKeeperSemaphore(const ZooKeeperLockService& service, const std::string& name, int permits);
    ~ZooKeeperSemaphore();
    ZooKeeperSemaphore(const ZooKeeperSemaphore&) = delete;
    ZooKeeperSemaphore& operator=(const ZooKeeperSemaphore&) = delete;

    // Creates a lease node and waits until it is among the first N, or until `deadline` (then
    // deletes it and returns nothing). ConnectionError when ZooKeeper cannot be reached.
    std::optional<ZkLease> acquire(std::chrono::steady_clock::time_point deadline);
    // Deletes the lease node: true, or false when it was already gone (the session ended).
    bool release(const ZkLease& lease);
    // Lease nodes present now (held and waiting).
    int children();
    // How the session stands; also sends a probe that keeps last heard fresh (the watchdog calls
    // it every T/6 or more often).
    ZkSessionHealth health();
    // Until when a permit of `session` is valid, asked on every lost(): last_heard + T − margin,
    // last_heard being the send time of the newest request the ensemble answered (probed by
    // health(); ZooKeeperLastHeard), since the ensemble expires the session T after it last heard
    // from the client; while disconnected, no later than disconnected_since + T/3 − margin either
    // (the ZooKeeper mutex's rule, L11); min once the session expired, was replaced or the
    // semaphore is gone. Safe to call after the semaphore was destroyed.
    std::function<std::chrono::steady_clock::time_point()> session_bound(std::uint64_t session,
                                                                        std::chrono::milliseconds margin) const;
    // Closes the session `session` (when it is still the current one) after its permits were
    // reported lost for unreachability: a session that survived the disconnection must not keep
    // lease nodes nobody holds. The next acquire opens a new session.
    void abandon_session(std::uint64_t session);
    std::chrono::milliseconds session_timeout() const;
    // Wakes every waiter so that it gives up (the semaphore is being destroyed).
    void close();
    const std::string& dir() const noexcept;

    struct State;

private:
    ZkSessionHealth health_now(std::shared_ptr<ZkHandle>& probe);
    std::shared_ptr<State> state_;
};

}  // namespace lockstep::detail

#endif  // LOCKSTEP_HAVE_ZOOKEEPER
