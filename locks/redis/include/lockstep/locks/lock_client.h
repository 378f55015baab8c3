// RedisLockClient: the per-process side of every distributed lock (RedisMutex,
// RedisReadWriteLock). Create one per process (per Redis server) and pass it to the locks.
//
// It owns
//   - a random client id; the owner of a hold is "<client id>:<owner number>:<hold number>",
//     where owner numbers (a thread's, or a movable Hold's, hold.h) are never reused within a
//     process (unlike pthread ids), so a new thread cannot "re-enter" a hold left behind by a
//     dead one, and every acquisition gets a hold number of its own, so a late release or
//     renewal of an earlier hold cannot end or extend a later one of the same owner;
//   - the hold registry: which thread of this process holds which lock, how often (reentrant
//     count), with which fencing token, and whether the hold was lost;
//   - the watchdog thread (L5): it renews every renewed hold of this client at lease/3, all
//     holds due at about the same time in one pipelined round trip. A renewal that finds the
//     hold gone marks it lost and reports it (LockLoss), it never re-creates it. A hold that
//     cannot be renewed for a whole lease (server unreachable) is reported lost as well, and so
//     is a hold with a fixed (non-renewed) lease once that lease has run out;
//   - the waiting side (L7, L9): all waiters of this client share the RedisClient's one
//     subscriber connection; per lock name there is one subscribed channel per client, and a
//     reconnect of the subscriber wakes every waiter to re-check (messages may have been lost).
//
//   lockstep::RedisClient redis(options);
//   lockstep::RedisLockClient locks(redis);
//   lockstep::RedisMutex m(locks, "product:42");
//   { std::scoped_lock hold(m); ... m.fence_token() ... }
//
// Thread safety: all members may be called from any thread.
// REQUIRES: the RedisClient outlives this client. Locks made from it may outlive it: destroying
// the client stops the watchdog, releases every hold still registered (best effort; the lease
// ends it otherwise) and reports it lost (LockLossReason::ClientClosed: on_lost, a log line, the
// losses counter), and wakes every thread waiting in lock() with LockClientClosedError; it
// returns once those threads have left Redis alone. After that, a lock's unlock() is a no-op
// that never touches Redis, unlock_checked() throws LockLostError, lock() throws
// LockClientClosedError.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "lockstep/core/latency_histogram.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/locks/lock_keys.h"
#include "lockstep/locks/lock_loss.h"  // FenceToken, LockLoss, LockLossReason

namespace lockstep {

class RedisMutex;
class RedisReadWriteLock;

// What RedisLockClient does when the server may evict lock keys (B3, docs/locks.md "Eviction").
enum class EvictionCheck {
    // ConfigError at construction unless maxmemory is 0 or maxmemory-policy is noeviction.
    Refuse,
    // The same finding as an error-level log line, and the client works anyway (e.g. a test of
    // what eviction does, or a deployment that accepts the risk knowingly).
    Warn,
    // No check (no CONFIG GET at construction).
    Off,
};

// RACES L8: WAIT for replica acknowledgements after every new acquisition (docs/locks.md
// "WAIT after acquire"). A new hold that fewer than `replicas` replicas acknowledged within
// `timeout` is released again and the acquisition throws ReplicationWaitError; re-entries and
// renewals are not waited for.
struct ReplicationWait {
    // 0: off (the default): an acquisition returns as soon as the master has the key.
    int replicas = 0;
    // The WAIT timeout: how long an acquisition waits for the acknowledgements at most.
    std::chrono::milliseconds timeout{100};
};

struct LockClientOptions {
    // Namespace of every key (see LockKeys). Two applications sharing a Redis use two prefixes.
    std::string prefix = "ls:";
    // Called once for every hold of this client that is lost, on the thread that notices
    // (usually the watchdog). Keep it quick; it must not lock or unlock locks of this client.
    std::function<void(const LockLoss&)> on_lost;
    // How long a waiting acquirer's queue entry (mutex) or claim (read-write lock) outlives the
    // moment it planned to re-check. A waiter that dies is dropped this long after that moment.
    std::chrono::milliseconds waiter_grace{1000};
    // A waiting RedisReadWriteLock acquirer holds a claim that makes later arrivals of the other
    // kind wait (writer preference, phase fairness). It re-checks and renews the claim at least
    // this often, so a dead waiter's claim blocks others for at most claim_refresh + waiter_grace.
    // Every waiter (RedisMutex too) re-checks at least this often, so a wake-up sent to a waiter
    // that cannot take it (a frozen process at the head of the queue, a lost message) leaves a
    // free lock untaken for at most this long.
    std::chrono::milliseconds claim_refresh{2000};
    // The hand-off (RedisMutex only): a release that wakes the oldest waiter
    // reserves the lock for that waiter for `handoff_window`, if it has waited at least
    // `handoff_after` (Go's sync.Mutex starvation mode: barging while waits are short, hand-off
    // once one is not). During the window every other acquirer, the releasing thread included,
    // finds the lock busy; the woken waiter takes it with the one script it sends anyway. The
    // reservation is a TTL on the lock's own key, so a woken waiter that dies or freezes blocks
    // the lock for at most `handoff_window` (then anyone may take it; a waiter that lost its
    // window keeps its place and is woken first again). 0 ms window: no hand-off (pure barging).
    // Measured (fairness bench, 16 threads, load 14-16): no hand-off 1,028-1,492 acq/s, longest
    // wait 226-323 ms, 67-72% same-thread; strict (after 0) 0% same-thread but 420-2,381 acq/s
    // (every hand-over waits for a thread wake-up); after 5 ms 2,645-6,836 acq/s, longest wait
    // 10-107 ms, 20-53% same-thread. Hence 5 ms.
    std::chrono::milliseconds handoff_window{100};
    std::chrono::milliseconds handoff_after{5};
    // The local gate (RedisMutex only; docs/locks.md "The local gate"): threads of this client
    // that want the same mutex queue in this process, and only the one that passed the gate
    // talks to Redis, for its acquisition and its hold's whole life. Redis then sees one
    // contender per process and name; a hand-over between threads of one process costs no
    // publish and no wasted try. The gate follows the same rule with its own threshold,
    // local_handoff_after (barging while waits are short, a direct hand-over to the oldest local
    // waiter once it waited that long).
    // try_lock() fails at once while another thread of this client holds or acquires the mutex;
    // try_lock_for/until wait at the gate until their deadline. false: every thread goes to
    // Redis on its own (the behaviour before the gate, kept for tests and benchmarks).
    bool local_gate = true;
    // The local gate's own hand-off threshold: a leaving thread hands the gate directly to the
    // oldest local waiter once that waiter has waited this long, else frees the gate and wakes it
    // to compete (and the leaving thread may take it back: same-thread re-acquisition). Unset:
    // 250 µs, or handoff_after if that is shorter. 0: strict FIFO among this process's threads.
    // Measured (bench fairness_sweep, 16 threads, one process, 12 interleaved repetitions per
    // setting, load 8-10; medians, longest wait the max): 5 ms 40% same-thread, 18,160 acq/s,
    // longest 81 ms; 1 ms 34%, 18,632, 141 ms; 500 µs 0%, 19,850, 59 ms; 250 µs 0%, 21,102,
    // 65 ms; 0 0%, 11,714, 57 ms. A local hand-over costs one thread wake-up (p50 ~40 µs), less
    // than the Redis round trips of a cycle, so below ~1 ms (where the head of a 16-deep queue
    // has always waited long enough) the gate is FIFO at no throughput cost. Hence 250 µs.
    std::optional<std::chrono::microseconds> local_handoff_after;
    // TTL of the fencing counter key. Tokens stay increasing when it expires (the server clock
    // is the floor); while it lives it also covers small backward steps of the server clock.
    std::chrono::milliseconds fence_counter_ttl{std::chrono::hours(24)};
    // B3: every lock key has a TTL, so under maxmemory any volatile-* or allkeys-* policy may
    // evict a held lock and let a second holder in. At construction the client reads
    // `maxmemory` and `maxmemory-policy` (CONFIG GET) and refuses such a server (ConfigError)
    // unless this says otherwise. Where CONFIG is not allowed (renamed, ACL, a managed service)
    // it logs one warning per process and goes on.
    EvictionCheck eviction_check = EvictionCheck::Refuse;
    // L8: replica acknowledgements required of every new acquisition (off by default).
    ReplicationWait replication_wait;
};

// Counters, for tests and metrics. Monotonic since construction.
struct LockClientStats {
    std::uint64_t acquire_attempts = 0;  // acquire scripts run (first tries and retries)
    std::uint64_t acquired = 0;          // new acquisitions (not re-entries)
    std::uint64_t wakeups = 0;           // waiters woken by a release message or reconnect
    std::uint64_t renew_batches = 0;     // watchdog round trips
    std::uint64_t renewals = 0;          // holds renewed successfully
    std::uint64_t losses = 0;            // holds reported lost
    std::uint64_t unlocks_of_lost_holds = 0;  // unlock() calls that found the hold lost (no throw)
    std::uint64_t unlock_errors = 0;     // unlock() calls whose release failed (Redis unreachable)
    std::uint64_t gate_waits = 0;        // acquisitions that waited at a local gate (local_gate)
    // Latency histograms of this client's locks (all names, mutexes and read-write locks):
    // acquire_latency from the lock()/try_lock call to a new acquisition (the wait included;
    // re-entries and failed tries are not recorded), hold_time from a new acquisition to its
    // last unlock (released, found lost, or failed).
    HistogramSnapshot acquire_latency;
    HistogramSnapshot hold_time;
};

class RedisLockClient {
public:
    explicit RedisLockClient(RedisClient& redis, LockClientOptions options = {});
    ~RedisLockClient();
    RedisLockClient(const RedisLockClient&) = delete;
    RedisLockClient& operator=(const RedisLockClient&) = delete;

    // 32 lowercase hex digits, random per client.
    const std::string& id() const noexcept;
    // The owner string of the calling thread: "<id>:<thread number>". Each hold's owner value in
    // Redis is this string, ':' and a number of its own (one per acquisition, re-entries share
    // it), so that a release or renewal of an earlier hold that arrives late cannot touch a later
    // hold of the same thread.
    std::string owner_of_this_thread() const;
    LockKeys keys(std::string_view name) const;

    RedisClient& redis() const noexcept;
    const LockClientOptions& options() const noexcept;
    LockClientStats stats() const;
    // Holds currently tracked (held, or lost and not yet unlocked), over all threads.
    std::size_t tracked_holds() const;
    // Whether the eviction check (LockClientOptions::eviction_check) found that the server may
    // evict lock keys (only possible with EvictionCheck::Warn: Refuse throws instead).
    bool eviction_possible() const noexcept;

    struct Impl;  // locks/redis/src/lock_client_impl.h

private:
    friend class RedisMutex;
    friend class RedisReadWriteLock;
    Impl& impl() const noexcept { return *impl_; }
    // Locks keep the Impl alive, so a lock used after its client was destroyed finds it closed
    // instead of a dangling reference.
    std::shared_ptr<Impl> impl_;
};

}  // namespace lockstep
