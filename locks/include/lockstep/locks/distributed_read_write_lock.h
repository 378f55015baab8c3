// DistributedReadWriteLock: the backend-neutral many-readers-or-one-writer lock. Write side:
// TimedLockable (lock, try_lock, try_lock_for/until, unlock); read side: SharedTimedLockable
// (lock_shared, try_lock_shared, try_lock_shared_for/until, unlock_shared), so std::unique_lock
// takes it for writing and std::shared_lock for reading.
//
//   auto rw = service.make_read_write_lock("product:42");
//   { std::shared_lock read(*rw); ... }                        // readers overlap
//   { std::unique_lock write(*rw); ... rw->fence_token() ... } // one writer, nobody reading
//
// The contract (every backend, tests/lock_conformance):
//   - Both sides reentrant per thread (L6). Write -> read downgrade allowed (a writer may
//     lock_shared, then unlock the write side). Read -> write upgrade refused with
//     LockUpgradeError at once (two upgrading readers would wait for each other forever).
//   - Write acquisitions get fencing tokens (the same counter as the backend's mutex of the
//     same name); read holds have none.
//   - Movable holds of either side (acquire(), acquire_shared(), hold.h): an owner of their
//     own, as DistributedMutex's. A read Hold is never a downgrade of a thread's write hold.
//   - Losses and errors as DistributedMutex: validity on the holder's own clock (lost() true
//     from `sent + lease − drift` on, no round trip; on_lost once, on time), LockLostError,
//     NotOwnerError. Each side's hold has its own validity; lost() is true when either side's is.
//
// Thread safety: as DistributedMutex. REQUIRES: the service that made it outlives it.
#pragma once

#include <chrono>
#include <string>

#include "lockstep/locks/hold.h"
#include "lockstep/locks/lock_errors.h"
#include "lockstep/locks/lock_loss.h"
#include "lockstep/locks/steady_deadline.h"

namespace lockstep {

class DistributedReadWriteLock {
public:
    virtual ~DistributedReadWriteLock() = default;

    // Write side. LockUpgradeError when the calling thread holds only the read side.
    virtual void lock() = 0;
    virtual bool try_lock() = 0;
    template <class Rep, class Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
        return try_lock_until_steady(detail::deadline_from_now(timeout));
    }
    template <class Clock, class Duration>
    bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
        return try_lock_until_steady(detail::deadline_from_now(deadline - Clock::now()));
    }
    virtual bool try_lock_until_steady(std::chrono::steady_clock::time_point deadline) = 0;
    // A lost hold is reported, never thrown (safe in std guards); the _checked variants throw
    // LockLostError (UnlockMode, lock_loss.h).
    void unlock() { unlock_as(UnlockMode::Report); }
    void unlock_checked() { unlock_as(UnlockMode::Throw); }

    // Read side.
    virtual void lock_shared() = 0;
    virtual bool try_lock_shared() = 0;
    template <class Rep, class Period>
    bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& timeout) {
        return try_lock_shared_until_steady(detail::deadline_from_now(timeout));
    }
    template <class Clock, class Duration>
    bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration>& deadline) {
        return try_lock_shared_until_steady(detail::deadline_from_now(deadline - Clock::now()));
    }
    virtual bool try_lock_shared_until_steady(std::chrono::steady_clock::time_point deadline) = 0;
    void unlock_shared() { unlock_shared_as(UnlockMode::Report); }
    void unlock_shared_checked() { unlock_shared_as(UnlockMode::Throw); }

    // Movable holds of the write side (hold.h); as DistributedMutex::acquire and try_acquire*.
    virtual Hold acquire() = 0;
    Hold try_acquire() { return try_acquire_until_steady(std::chrono::steady_clock::time_point::min()); }
    template <class Rep, class Period>
    Hold try_acquire_for(const std::chrono::duration<Rep, Period>& timeout) {
        return try_acquire_until_steady(detail::deadline_from_now(timeout));
    }
    virtual Hold try_acquire_until_steady(std::chrono::steady_clock::time_point deadline) = 0;
    // Movable holds of the read side (fence_token() 0).
    virtual Hold acquire_shared() = 0;
    Hold try_acquire_shared() { return try_acquire_shared_until_steady(std::chrono::steady_clock::time_point::min()); }
    template <class Rep, class Period>
    Hold try_acquire_shared_for(const std::chrono::duration<Rep, Period>& timeout) {
        return try_acquire_shared_until_steady(detail::deadline_from_now(timeout));
    }
    virtual Hold try_acquire_shared_until_steady(std::chrono::steady_clock::time_point deadline) = 0;

    // Either side of the calling thread's holds is known lost. No round trip.
    virtual bool lost() const = 0;
    virtual int write_hold_count() const = 0;
    virtual int read_hold_count() const = 0;
    // Token of the calling thread's write hold. REQUIRES: it holds the write side.
    virtual FenceToken fence_token() const = 0;
    virtual const std::string& name() const noexcept = 0;

protected:
    // The release entry points a backend implements (see UnlockMode).
    virtual void unlock_as(UnlockMode mode) = 0;
    virtual void unlock_shared_as(UnlockMode mode) = 0;
};

}  // namespace lockstep
