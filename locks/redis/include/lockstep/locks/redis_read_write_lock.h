// RedisReadWriteLock: many readers or one writer, across processes. Meets the standard
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

#include "lockstep/locks/lock_client.h"
#include "lockstep/locks/lock_errors.h"
#include "lockstep/locks/redis_mutex.h"

namespace lockstep {

class LockSide;

struct ReadWriteLockOptions {
    // Lease of each hold, read or write; renewed every lease/3 unless `renew` is false.
    std::chrono::milliseconds lease{30000};
    bool renew = true;
    // lock() / lock_shared() give up with TimeoutError after this long; unset: wait indefinitely.
    std::optional<std::chrono::milliseconds> max_wait;
    std::function<void(const LockLoss&)> on_lost;
    // A cap on every hold (LockOptions::max_hold, docs/holds.md); unset: none.
    std::optional<std::chrono::milliseconds> max_hold;
};

class RedisReadWriteLock {
public:
    RedisReadWriteLock(RedisLockClient& client, std::string name, ReadWriteLockOptions options = {});
    ~RedisReadWriteLock();
    RedisReadWriteLock(const RedisReadWriteLock&) = delete;
    RedisReadWriteLock& operator=(const RedisReadWriteLock&) = delete;

    // Write side. LockUpgradeError when the calling thread holds only the read side.
    void lock();
    bool try_lock();
    template <class Rep, class Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
        return try_lock_until_steady(false, steady_in(timeout));
    }
    template <class Clock, class Duration>
    bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
        return try_lock_until_steady(false, steady_in(deadline - Clock::now()));
    }
    // Never throws for a lost hold or a failed release (reported instead); NotOwnerError if
    // this thread does not hold the write side.
    void unlock();
    // unlock(), then LockLostError if the write hold was lost (or the Redis error).
    void unlock_checked();

    // Read side.
    void lock_shared();
    bool try_lock_shared();
    template <class Rep, class Period>
    bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& timeout) {
        return try_lock_until_steady(true, steady_in(timeout));
    }
    template <class Clock, class Duration>
    bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration>& deadline) {
        return try_lock_until_steady(true, steady_in(deadline - Clock::now()));
    }
    void unlock_shared();
    void unlock_shared_checked();

    // Movable holds (lockstep/locks/hold.h, docs/holds.md): an owner of their own, never a
    // re-entry, upgrade or downgrade of a thread's hold. acquire*() wait until max_wait
    // (TimeoutError); try_acquire*() return an empty Hold when busy or at the deadline.
    Hold acquire();
    Hold try_acquire();
    Hold try_acquire_until_steady(std::chrono::steady_clock::time_point deadline);
    Hold acquire_shared();
    Hold try_acquire_shared();
    Hold try_acquire_shared_until_steady(std::chrono::steady_clock::time_point deadline);

    // Either side of the calling thread's holds is known lost.
    bool lost() const;
    int write_hold_count() const;
    int read_hold_count() const;
    // Token of the calling thread's write hold. REQUIRES: it holds the write side.
    FenceToken fence_token() const;

    const std::string& name() const noexcept { return keys_.name(); }
    const LockKeys& keys() const noexcept { return keys_; }

private:
    template <class D>
    static std::chrono::steady_clock::time_point steady_in(D d) {
        return detail::steady_deadline_after(d);
    }
    bool try_lock_until_steady(bool shared, std::chrono::steady_clock::time_point deadline);
    void check_upgrade() const;
    RedisLockClient::Impl& impl() const noexcept { return *impl_; }
    std::shared_ptr<RedisLockClient::Impl> impl_;
    LockKeys keys_;
    ReadWriteLockOptions options_;
    // The two sides, built once (locks/src/redis_read_write_lock.cpp).
    std::shared_ptr<const LockSide> read_side_, write_side_;
};

}  // namespace lockstep
