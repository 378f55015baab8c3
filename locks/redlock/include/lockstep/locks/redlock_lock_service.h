// RedlockLockService: the LockService of the Redlock backend: one lock over N independent Redis
// masters (no replication between them), held when a quorum of them agree, so that a minority
// of masters crashing or restarting empty cannot hand the lock to a second client (RACES L8:
// a single master's failover loses the lock). docs/locks.md "Redlock" has the algorithm, the
// argument for its fencing tokens and what it does not guarantee.
//
//   auto locks = lockstep::open_lock_service("redlock://127.0.0.1:7001,127.0.0.1:7002,"
//                                            "127.0.0.1:7003,127.0.0.1:7004,127.0.0.1:7005");
//   auto m = locks->make_mutex("order:42");
//   std::unique_lock hold(*m);
//   lockstep::fenced_update(tx, 42, m->fence_token(), {...});   // the database is the backstop
//
// What it does, per acquisition: one Lua script to every master IN PARALLEL (sent to all, then
// the replies collected: one round trip, not N), holding when `quorum()` masters said yes within
// the validity lease − elapsed − drift; a second parallel round trip only when the masters'
// fencing counters disagree (after a restart). Release goes to every master; the service's
// watchdog renews every hold on every master each lease/3 and reports it lost (lost(), on_lost)
// as soon as fewer than a quorum renewed it. A waiter subscribes to the name's release channel on
// every master and retries on each release message (each master's release script
// announces its deletion); a random poll stays as the bounded fallback for a lost message.
//
// Mutex only: supports_read_write() is false (a quorum read-write lock needs the reader set kept
// per master and reconciled on every acquisition: not built).
//
// Thread safety: every member may be called from any thread. REQUIRES: the service outlives every
// lock it made.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/core/redis_options.h"
#include "lockstep/locks/lock_service.h"

namespace lockstep {

struct RedlockOptions {
    // The independent masters, each reached with these options (host/port replaced; auth, db and
    // pool settings shared). At least 3 (and distinct): ConfigError otherwise.
    std::vector<RedisEndpoint> masters;
    RedisOptions node;
    // How many masters may restart EMPTY (a crash without persistence) while a lock is held
    // without breaking mutual exclusion or fencing-token order. The quorum is
    // (N + tolerated_restarts) / 2 + 1: with 5 masters, 1 → 4 masters must agree (and any two
    // quorums share 2 masters, at most 1 of them restarted); 0 → the classic majority of 3.
    int tolerated_restarts = 1;
    // Clock drift allowance per lease (Redlock's drift: lease × factor + 2 ms).
    double clock_drift_factor = 0.01;
    // A contended waiter retries after a random pause in [min, max].
    std::chrono::milliseconds retry_min{5};
    std::chrono::milliseconds retry_max{25};
    // Once a waiter is subscribed to the release messages (on at least one master), it retries
    // on each message, or after a random pause in [subscribed_poll / 2, subscribed_poll]
    // when none comes: the most a lost message (a subscriber reconnecting) costs.
    std::chrono::milliseconds subscribed_poll{100};
    // false: the scripts go to the masters one after another (the sequential fan-out of other
    // clients; kept as the benchmark's baseline). true: all in flight at once.
    bool parallel = true;
};

// redlock://[[user]:password@]host:port,host:port,...[?param=value&...]
//   params: restarts=N (tolerated_restarts), drift=F (clock_drift_factor), fanout=parallel|sequential,
//   and every redis:// param (connect_timeout, socket_timeout, pool_size, pool_wait_timeout).
// A master that does not answer must not stall an acquisition for long: connect_timeout and
// socket_timeout default to 250ms here (redis:// defaults to 1s).
RedlockOptions parse_redlock_url(std::string_view url);

class RedlockLockService : public LockService {
public:
    explicit RedlockLockService(RedlockOptions redlock, LockServiceOptions options = {});
    ~RedlockLockService() override;  // stops the watchdog

    std::unique_ptr<DistributedMutex> make_mutex(std::string name, LockOptions options = {}) override;
    // ConfigError: Redlock has no read-write lock.
    std::unique_ptr<DistributedReadWriteLock> make_read_write_lock(std::string name, LockOptions options = {}) override;
    bool supports_read_write() const noexcept override { return false; }
    std::string_view backend() const noexcept override { return "redlock"; }
    // TIME of the first master that answers, in the masters' order: the masters' clocks are
    // independent, so keep them synchronised (NTP) for nodes to agree on a job's slot.
    std::chrono::system_clock::time_point server_time() override;

    std::size_t masters() const noexcept;
    // How often a waiter of this service retried because a release message woke it, and
    // because its poll pause ran out (tests and diagnostics).
    std::uint64_t wakeups_by_message() const noexcept;
    std::uint64_t wakeups_by_poll() const noexcept;
    // How often the watchdog renewed a hold of this service on a quorum of masters (extending its
    // validity); failed or minority rounds are not counted (tests and diagnostics).
    std::uint64_t renewals() const noexcept;
    // Masters that must agree for a hold: (N + tolerated_restarts) / 2 + 1.
    std::size_t quorum() const noexcept;
    // The Redis key of `name`'s lock on every master (e.g. for a test to delete it).
    std::string lock_key(const std::string& name) const;
    std::string fence_key(const std::string& name) const;

    struct State;

private:
    std::shared_ptr<State> state_;
};

}  // namespace lockstep
