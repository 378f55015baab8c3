// ZooKeeperLockService: distributed mutexes and read-write locks on ZooKeeper, Apache Curator's
// recipes (InterProcessMutex, InterProcessReadWriteLock) over the C client libzookeeper-mt.
// ZooKeeper is CP: a hold survives a leader change, and a lost hold is the session's expiry,
// decided by the ensemble's quorum, not by one server's memory (L8).
//
//   lockstep::ZooKeeperLockService locks({.hosts = "127.0.0.1:2181"});
//   auto m = locks.make_mutex("product:42");
//   { std::unique_lock hold(*m); ... m->fence_token() ... }
//
// The recipe (docs/locks.md, "ZooKeeper"):
//   - Each acquisition creates an EPHEMERAL_SEQUENTIAL node "_c_<guid>-lock-<seq>" (a read or
//     write hold: "_c_<guid>-__READ__<seq>" / "_c_<guid>-__WRIT__<seq>", Curator's names) under the
//     lock's container node; the holder is the lowest sequence. A waiter watches only the node
//     just before its own (L9: a release wakes one waiter, no herd); a reader of a read-write
//     lock watches only the nearest earlier writer, a writer the node just before it.
//   - A create whose reply was lost to a connection loss may have been applied: the retry first
//     looks for a child carrying this attempt's guid and adopts it (never two nodes per attempt).
//   - The fencing token is the node's czxid: the zxid of the create, totally ordered across the
//     ensemble (epoch in the high bits grows with every leader change), and a later holder's
//     node was created after every earlier holder's, so tokens strictly increase per name.
//   - Session expiry = every hold of the service lost: reported once per hold through on_lost,
//     lost() true, unlock() LockLostError; the service opens a new session for later locks.
//     The on_lost callbacks run on the service's own reporter thread (one per service, reports
//     in order), never on the client library's threads and with no lock of the service held: a
//     callback may block, or lock and unlock other locks of this service; a new session opens
//     meanwhile. A slow callback only delays the reports queued after it.
//     A service that stays disconnected for a whole session timeout reports its holds lost too
//     (Unreachable), since the ensemble has expired the session by then (Curator's LOST), and
//     closes that session itself: its reconnection attempts, when the ensemble's replies are only
//     late, would keep renewing it at the ensemble, nodes and all.
//   - try_lock_until / try_lock_for return by max(deadline, start + T) whatever the network does
//     (false, or ConnectionError when no session could be opened by then): every call of an
//     acquisition is waited for until then, and the queue node of one that gives up is deleted
//     in the background, again after every reconnect until the ensemble confirms it.
//   - A hold is valid until last_heard() + T − drift (T: the session timeout): the ensemble
//     expires the session T after it last heard from the client, whenever the client library
//     gets round to declaring the connection lost.
//   - Reentrancy is counted here (L6), never by more nodes.
//   - LockOptions::lease is not used: the session timeout is the lease of every hold.
//
// Thread safety: every member may be called from any thread. REQUIRES: the service outlives
// every lock it made.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "lockstep/locks/lock_service.h"

namespace lockstep {

struct ZooKeeperLockOptions {
    // "host:port[,host:port...]" of the ensemble.
    std::string hosts = "127.0.0.1:2181";
    // Session timeout asked of the server (it clamps to its [min, max]): how long a stopped or
    // partitioned holder keeps its locks, and how long a killed holder's node stays.
    std::chrono::milliseconds session_timeout{std::chrono::seconds(10)};
    // Connecting (and reconnecting after an expiry) gives up with ConnectionError after this.
    std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
    // Root of every lock node: <root>/<prefix><name>#m (mutex) and ...#rw (read-write).
    std::string root = "/lockstep";
    // false: the lock path is <root>/<prefix><name> with no "#m" / "#rw", so that a lockstep lock
    // joins an existing Curator lock such as /locks/orders (root "/locks", prefix "", name
    // "orders"; docs/zookeeper-curator.md). Then a mutex and a read-write lock of one name share a
    // path and must not both be used, as with Curator.
    bool kind_suffix = true;
    // How often the client looks the hosts up again while connected (zoo_set_servers_resolution_
    // delay). -1 (default): only when it (re)connects, as the Java client does; > 0: at most once
    // per that many ms, to follow DNS changes of a live ensemble; 0: libzookeeper's own default,
    // a lookup (getaddrinfo, a netlink dump of the interfaces) at every wake-up of its I/O thread,
    // which was ~8% of an uncontended lock cycle on loopback.
    std::chrono::milliseconds host_resolution_delay{-1};
};

struct ZooKeeperLockStats {
    std::uint64_t sessions = 0;         // sessions opened (1 + one per expiry)
    std::uint64_t acquired = 0;         // new acquisitions
    std::uint64_t watches_fired = 0;    // predecessor watches that woke a waiter
    std::uint64_t handovers_without_listing = 0;  // waits ended by the only blocker's deletion (no re-list)
    std::uint64_t create_retries = 0;   // creates repeated after a connection loss
    std::uint64_t adopted_nodes = 0;    // of those, nodes found by guid instead of created again
    std::uint64_t connection_retries = 0;  // other calls repeated after a reconnect in the session
    std::uint64_t losses = 0;           // holds reported lost
    std::uint64_t requeued = 0;         // waits whose own node vanished (session expired): queued again
    std::uint64_t handles_closed = 0;   // client handles closed (by the replacer, or by the last call on it)
    std::uint64_t forced_expiry_retries = 0;  // expire_session() attempts that ended nothing (tried again)
    std::uint64_t expiries = 0;         // sessions seen to end by expiry (each one's holds reported lost)
    std::uint64_t nodes_given_up = 0;   // queue nodes left by an acquisition that gave up (deleted in the background)
    std::uint64_t sessions_given_up = 0;  // sessions closed after a whole session timeout disconnected
};

class ZooKeeperLockService : public LockService {
public:
    // Connects (ConnectionError if no session within connect_timeout) and creates `root`.
    explicit ZooKeeperLockService(ZooKeeperLockOptions zk, LockServiceOptions options = {});
    ~ZooKeeperLockService() override;

    std::unique_ptr<DistributedMutex> make_mutex(std::string name, LockOptions options = {}) override;
    std::unique_ptr<DistributedReadWriteLock> make_read_write_lock(std::string name, LockOptions options = {}) override;
    std::string_view backend() const noexcept override { return "zookeeper"; }
    // Writes <root>/_clock and returns its Stat mtime: the time the LEADER stamped on the write
    // (every write's time comes from the leader's clock, whichever server the client talks
    // to), in milliseconds.
    std::chrono::system_clock::time_point server_time() override;

    // Ends this service's session the way an expiry does (another client attaches to the session
    // and closes it): for tests that force a loss at a known step. Returns once the holds of that
    // session were reported lost (trying again if an attempt ended nothing); after 30 s without
    // it, a warning in the log and a return (the caller's assertions then fail on the hold that
    // was not lost). While a replacement is in flight (the last session expired and a new one is
    // being opened) it waits for the new session and ends that one; a session that expired and
    // was not replaced yet has nothing left to end (it waits for its reports). Called from a loss
    // callback, it returns once the expiry is seen (its reports run after the callback).
    void expire_session();
    // The negotiated session timeout of the current session.
    std::chrono::milliseconds session_timeout() const;
    // When the current session last heard from the ensemble: the send time of the newest request
    // it answered (an exists() of the service's own every T/3 keeps it fresh). Every hold is
    // valid until then + session_timeout() − drift, and no longer (L11).
    std::chrono::steady_clock::time_point last_heard() const;
    ZooKeeperLockStats stats() const;
    // The options it was opened with, and its LockServiceOptions::prefix (other recipes on the
    // same ensemble, such as the semaphore, lay their nodes out beside the locks').
    const ZooKeeperLockOptions& zookeeper_options() const noexcept;
    const std::string& prefix() const noexcept;

    struct State;

private:
    std::shared_ptr<State> state_;
};

// Parses "zookeeper://h:p[,h:p][/][?session_timeout_ms=N&connect_timeout_ms=N&host_resolution_delay_ms=N]".
ZooKeeperLockOptions parse_zookeeper_url(std::string_view url);

}  // namespace lockstep
