// RedisFairLockService: the "redis-fair" backend. Its mutex is fair (Redisson's RFairLock): a
// free lock goes to the oldest live waiter in server-side arrival order, and nobody overtakes an
// older live waiter (no barging). Its read-write locks are RedisReadWriteLock (already
// phase-fair), through a RedisLockService on the same server.
//
//   lockstep::RedisFairLockService locks(lockstep::parse_redis_url(url));
//   auto m = locks.make_mutex("job:42");   // FIFO
//
// The fair mutex (scripts in fair_lock_scripts.cpp):
//   - The hold is a string key owner -> TTL lease (L1-L4 as RedisMutex), renewed every lease/3
//     by this service's watchdog (L5); a renewal that finds it gone reports the hold lost.
//   - A waiter joins a Redis list on its first busy attempt (server arrival order) and keeps a
//     per-waiter expiry that it refreshes at every re-check (at least every grace/2). A waiter
//     that dies is skipped once its grace runs out (LockServiceOptions has no grace: it is
//     RedisFairLockOptions::waiter_grace).
//   - A release publishes to the next live waiter's own channel only (L9); a lost message costs
//     at most grace/2 (the waiter's re-check), never a poll loop (L7).
//   - Fencing tokens from the name's counter shared with RedisMutex (strictly increasing).
//   - Reentrancy, typed errors, loss reporting: hold_table.h, as every non-Redis backend.
// Cost: one more key per waiter and FIFO hand-over (a free lock waits for the head waiter's
// round trip instead of going to whoever asks first); docs/locks.md has the measured figures.
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

    // Waiters in the line of `name` now (for tests).
    long long queue_length(const std::string& name) const;

    struct State;

private:
    std::shared_ptr<State> state_;
};

}  // namespace lockstep
