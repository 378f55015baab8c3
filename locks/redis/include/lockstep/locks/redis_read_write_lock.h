// RedisReadWriteLock: many readers or one writer, across processes: the `redis` backend's
// DistributedReadWriteLock (RedisLockService::make_read_write_lock returns one). Meets the standard
// TimedLockable (write side: lock, try_lock, try_lock_for/until, unlock) and SharedTimedLockable
// (read side: lock_shared, try_lock_shared, try_lock_shared_for/until, unlock_shared)
// requirements, so std::unique_lock / std::scoped_lock take it for writing and std::shared_lock
// for reading.
//
//   lockstep::RedisReadWriteLock rw(locks, "product:42");
//   { std::shared_lock read(rw); ... }                      // readers overlap
//   { std::unique_lock write(rw); ... rw.fence_token() ... } // one writer, nobody reading
//
// Semantics (docs/locks.md):
//   - Each holder has its own lease, renewed by the client's watchdog like a mutex hold: a
//     reader's lease is its own entry in a zset, so a dead reader blocks writers for at most
//     its lease, whatever other readers do; a dead writer for at most its lease.
//   - No starvation either way (phase-fair): a waiting reader or writer holds a claim with its
//     arrival time, and a free lock goes to the oldest claim's kind first. So while a writer
//     waits, readers arriving after it wait too (threads already reading may re-enter), and a
//     steady stream of readers cannot starve the writer; readers that waited longer than a
//     writer go before it, so a stream of writers cannot starve them either. A claim is renewed
//     at every re-check (at least every LockClientOptions::claim_refresh); a dead waiter's claim
//     expires within claim_refresh + waiter_grace.
//   - Both sides are reentrant per thread (L6). Write -> read downgrade is allowed: a writer
//     may lock_shared, then unlock the write side and keep reading. Read -> write upgrade is
//     refused with LockUpgradeError (no round trip, never a deadlock).
//   - Write acquisitions get fencing tokens from the same counter as a RedisMutex of the same
//     name; read holds have none.
//   - Releases are announced on one channel per name: a write release wakes this lock's
//     waiters (all readers may proceed together); the last reader leaving wakes them too.
//     Unlike RedisMutex, this is a broadcast to the waiters of this name.
//   - Errors and losses as RedisMutex: NotOwnerError; a lost hold is reported (on_lost, lost(),
//     log, counters) and unlock()/unlock_shared() never throw for it, so std guards are safe;
//     unlock_checked()/unlock_shared_checked() throw LockLostError for callers who want it.
//
// Thread safety: as RedisMutex; it may outlive its RedisLockClient as RedisMutex may.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "lockstep/locks/distributed_read_write_lock.h"
#include "lockstep/locks/lock_client.h"
#include "lockstep/locks/lock_errors.h"
#include "lockstep/locks/lock_options.h"
#include "lockstep/locks/redis_mutex.h"

namespace lockstep {

class LockSide;

// A RedisReadWriteLock's options are the neutral LockOptions (lock_options.h); the name stays
// for code written against it.
using ReadWriteLockOptions = LockOptions;

class RedisReadWriteLock final : public DistributedReadWriteLock {
public:
    RedisReadWriteLock(RedisLockClient& client, std::string name, ReadWriteLockOptions options = {});
    ~RedisReadWriteLock() override;
    RedisReadWriteLock(const RedisReadWriteLock&) = delete;
    RedisReadWriteLock& operator=(const RedisReadWriteLock&) = delete;

    // Write side. LockUpgradeError when the calling thread holds only the read side.
    // unlock() never throws for a lost hold or a failed release (reported instead);
    // NotOwnerError if this thread does not hold the write side. unlock_checked(): then
    // LockLostError if the write hold was lost (or the Redis error). The same for the read side's
    // unlock_shared() and unlock_shared_checked() (DistributedReadWriteLock).
    void lock() override;
    bool try_lock() override;
    bool try_lock_until_steady(std::chrono::steady_clock::time_point deadline) override;

    // Read side.
    void lock_shared() override;
    bool try_lock_shared() override;
    bool try_lock_shared_until_steady(std::chrono::steady_clock::time_point deadline) override;

    // Movable holds (lockstep/locks/hold.h, docs/holds.md): an owner of their own, never a
    // re-entry, upgrade or downgrade of a thread's hold. acquire*() wait until max_wait
    // (TimeoutError); try_acquire*() return an empty Hold when busy or at the deadline.
    Hold acquire() override;
    Hold try_acquire_until_steady(std::chrono::steady_clock::time_point deadline) override;
    Hold acquire_shared() override;
    Hold try_acquire_shared_until_steady(std::chrono::steady_clock::time_point deadline) override;

    // Either side of the calling thread's holds is known lost.
    bool lost() const override;
    int write_hold_count() const override;
    int read_hold_count() const override;
    // Token of the calling thread's write hold. REQUIRES: it holds the write side.
    FenceToken fence_token() const override;

    const std::string& name() const noexcept override { return keys_.name(); }
    const LockKeys& keys() const noexcept { return keys_; }

protected:
    void unlock_as(UnlockMode mode) override;
    void unlock_shared_as(UnlockMode mode) override;

private:
    void check_upgrade() const;
    RedisLockClient::Impl& impl() const noexcept { return *impl_; }
    std::shared_ptr<RedisLockClient::Impl> impl_;
    LockKeys keys_;
    ReadWriteLockOptions options_;
    // The two sides, built once (locks/redis/src/redis_read_write_lock.cpp).
    std::shared_ptr<const LockSide> read_side_, write_side_;
};

}  // namespace lockstep
