// RedisFairLockService: the "redis-fair" backend. Its mutex is fair (Redisson's RFairLock): a
// free lock goes to the oldest live waiter in server-side arrival order, and nobody overtakes an
// older live waiter (no barging). Its read-write locks are RedisReadWriteLock (already
// phase-fair), through a RedisLockService on the same server.
//
//   lockstep::RedisFairLockService locks(lockstep::parse_redis_url(url));
//   auto m = locks.make_mutex("job:42");   // FIFO
//
// The fair mutex is a RedisMutex over a fair side of the service's one RedisLockClient (its
// scripts in fair_lock_scripts.cpp, its hooks in fair_mutex_side.cpp; docs/locks-redis-fair.md):
//   - The hold is a string key -> TTL lease (L1-L4 as RedisMutex): the holder's waiter id, or
//     "<waiter id>#<token>" when a release granted it the lock; renewed
//     every lease/3 by the client's watchdog (L5); a renewal that finds it gone reports the
//     hold lost.
//   - A waiter joins a Redis list on its first busy attempt (server arrival order) and keeps a
//     per-waiter expiry that it refreshes at every re-check (at least every grace/2). A waiter
//     that dies is skipped once its grace runs out (LockServiceOptions has no grace: it is
//     RedisFairLockOptions::waiter_grace).
//   - Grant on release: while the line has a live waiter, a release does not free the lock; the
//     release script makes the oldest live waiter the holder (its lease, a new fencing token) and
//     SPUBLISHes the token on that waiter's service channel; the woken waiter runs no script
//     (L9: one waiter told). A waiter of the releasing service gets it in-process. A lost message
//     costs at most grace/2 (the waiter's re-check finds the lock its own, with a fresh token),
//     never a poll loop (L7); a waiter that gives up with a grant in flight hands the lock on.
//   - One sharded channel per (client, lock name), kept while the name has local waiters and
//     2 s after: no subscribe round trip per acquisition; while it is kept, a contended
//     acquisition joins the line in its first script.
//   - Fencing tokens from the name's counter shared with RedisMutex (strictly increasing).
//   - Reentrancy (a re-entry renews the hold in Redis), typed errors, loss reporting, movable
//     holds, LockClientStats: the Redis lock client's, as for RedisMutex.
// Cost: one list and one zset entry per waiter; FIFO hand-over (a release waits for nobody, but
// a free lock never goes to whoever asks first while someone waits); docs/locks.md has the
// measured figures.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "lockstep/core/redis_options.h"
#include "lockstep/locks/lock_service.h"

namespace lockstep {

struct RedisFairLockOptions {
    // How long a waiter that stopped re-checking keeps its place at the head of the line.
    std::chrono::milliseconds waiter_grace{1000};
    // TTL of the fencing counter key (the server clock is the floor after it expires).
    std::chrono::milliseconds fence_counter_ttl{std::chrono::hours(24)};
};

class RedisFairLockService : public LockService {
public:
    explicit RedisFairLockService(RedisOptions redis, LockServiceOptions options = {}, RedisFairLockOptions fair = {});
    ~RedisFairLockService() override;

    std::unique_ptr<DistributedMutex> make_mutex(std::string name, LockOptions options = {}) override;
    std::unique_ptr<DistributedReadWriteLock> make_read_write_lock(std::string name, LockOptions options = {}) override;
    std::string_view backend() const noexcept override { return "redis-fair"; }
    std::chrono::system_clock::time_point server_time() override;

    // Waiters in the line of `name` now (for tests).
    long long queue_length(const std::string& name) const;

    struct State;

private:
    std::shared_ptr<State> state_;
};

}  // namespace lockstep
