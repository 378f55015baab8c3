// DistributedMutex: the backend-neutral distributed mutex. Every backend's mutex implements it
// (Redis, fair Redis, MySQL GET_LOCK, ZooKeeper, in-memory), and every user of locks (the
// repository, the demo, the tests) depends on this interface only; a LockService makes them.
//
//   std::unique_ptr<lockstep::DistributedMutex> m = service.make_mutex("product:42");
//   {
//       std::unique_lock hold(*m);                   // TimedLockable: unique_lock, scoped_lock
//       lockstep::fenced_update(tx, 42, m->fence_token(), {...});
//       m->unlock_checked(); hold.release();         // LockLostError if it was lost
//   }
//
// The contract every backend meets (and tests/lock_conformance checks for each):
//   - TimedLockable: lock, try_lock, try_lock_for, try_lock_until, unlock.
//   - Reentrant per thread (L6), across every object of the same service and name; free after
//     as many unlocks as locks.
//   - A fencing token per new acquisition, strictly greater than every earlier token of the name
//     on that backend (re-entry returns the hold's token): pass it to db/fenced_write.h so a
//     paused holder's late write is refused (L5, L8).
//   - Validity on the holder's own clock (L11): a hold is valid until `sent + lease − drift`,
//     `sent` being the send time of its acquisition or of the last renewal the server
//     acknowledged (drift: max(2 ms, 1% of the lease), locks/src/hold_validity.h). lost() is true
//     from then on (checked against the clock on every call, no round trip), or earlier on any
//     evidence of loss, so it turns true before the server can give the lock to anyone else,
//     whatever the network does. on_lost fires once, with a LockLossReason (Unreachable when the
//     validity ran out unrenewed), at the latest at valid_until plus one tick of the thread that
//     watches it: the hold table's expiry thread (every backend but RedisMutex) wakes at
//     valid_until even while a renewal hangs; RedisMutex's watchdog reports at valid_until
//     unless it is itself waiting on a renewal, which its socket timeout bounds.
//     Per backend: Redis, fair Redis (a grant by message confirmed by a renewal, L12) and
//     Redlock (the quorum round's start) count from their scripts' send times; MySQL from each
//     keepalive's send time. Bounded otherwise: ZooKeeper holds are valid while the session is
//     connected and for T/3 − drift after a disconnection (T: the session timeout; the client
//     notices a silent ensemble after 2T/3), so a holder paused while connected learns of an
//     expiry only when it runs again (fencing tokens cover that); the in-memory backend has no
//     lease (holds end by unlock, expire() or the service's destruction).
//     MySQL cannot bound it on one side: a session that ends at the server (its connection
//     reset or killed, the server restarted) frees its GET_LOCK at once, before valid_until; the
//     holder learns at its next check, within lease/3 (tests/lock_conformance network cases).
//     Fence every write made under a MySQL hold (L5).
//   - A lost hold is never silent (L10) and never kills the process: lost() turns true, the
//     on_lost callbacks run once, and unlock() logs it and returns (it never throws over a loss
//     or a failed release, so a std guard is always safe). unlock_checked() throws LockLostError
//     instead, for callers who want the loss as an exception. unlock() by a thread that holds
//     nothing throws NotOwnerError and changes nothing. After an unlock_checked() that threw
//     LockLostError, the next unlock() of the same lock by the same thread (a std guard's
//     destructor) is a no-op.
//   - lock() gives up with TimeoutError after LockOptions::max_wait; backend failures surface as
//     ConnectionError / TimeoutError / DbError / ProtocolError.
//   - Movable holds (hold.h, docs/holds.md): acquire() / try_acquire*() take the lock for an
//     owner of its own, not the calling thread, and return it as a Hold that any thread may
//     release. Not reentrant: while a Hold is held, every other acquisition of the name (another
//     Hold, the thread that made it, any thread's lock()) waits as for another process. The same
//     hold registry, validity, renewal and loss reporting serve both kinds of owner.
//   - LockOptions::max_hold caps every hold (thread-owned or movable): reported lost
//     (MaxHoldReached) and given back at the cap.
//
// Thread safety: one object may be shared by many threads (like std::mutex); each thread's hold
// is its own. REQUIRES: the service that made it outlives it.
#pragma once

#include <chrono>
#include <string>

#include "lockstep/locks/hold.h"
#include "lockstep/locks/lock_loss.h"
#include "lockstep/locks/steady_deadline.h"

namespace lockstep {

class DistributedMutex {
public:
    virtual ~DistributedMutex() = default;

    // Blocks until acquired (or max_wait passes: TimeoutError).
    virtual void lock() = 0;
    // One attempt, no waiting.
    virtual bool try_lock() = 0;
    template <class Rep, class Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
        return try_lock_until_steady(detail::deadline_from_now(timeout));
    }
    template <class Clock, class Duration>
    bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
        return try_lock_until_steady(detail::deadline_from_now(deadline - Clock::now()));
    }
    // Waits until `deadline` at most. The one timed entry point a backend implements.
    virtual bool try_lock_until_steady(std::chrono::steady_clock::time_point deadline) = 0;
    // REQUIRES: the calling thread holds it (NotOwnerError otherwise). A lost hold or a failed
    // release is reported (lost(), on_lost, a log line), never thrown: safe in a std guard.
    void unlock() { unlock_as(UnlockMode::Report); }
    // The same, but LockLostError if the hold was lost and the backend's error if the release
    // failed (the hold is forgotten either way).
    void unlock_checked() { unlock_as(UnlockMode::Throw); }

    // A movable hold (hold.h): waits up to LockOptions::max_wait (TimeoutError after it).
    virtual Hold acquire() = 0;
    // One attempt, no waiting; an empty Hold when the lock is busy.
    Hold try_acquire() { return try_acquire_until_steady(std::chrono::steady_clock::time_point::min()); }
    template <class Rep, class Period>
    Hold try_acquire_for(const std::chrono::duration<Rep, Period>& timeout) {
        return try_acquire_until_steady(detail::deadline_from_now(timeout));
    }
    // Waits until `deadline` at most; an empty Hold when it passed.
    virtual Hold try_acquire_until_steady(std::chrono::steady_clock::time_point deadline) = 0;

    // The calling thread's hold is known lost or past its validity. No round trip.
    virtual bool lost() const = 0;
    // The calling thread's reentrant count; 0 when it does not hold the lock.
    virtual int hold_count() const = 0;
    bool held_by_this_thread() const { return hold_count() > 0; }
    // The fencing token of the calling thread's hold. REQUIRES: held (NotOwnerError otherwise).
    virtual FenceToken fence_token() const = 0;
    virtual const std::string& name() const noexcept = 0;

protected:
    // The one release entry point a backend implements (see UnlockMode).
    virtual void unlock_as(UnlockMode mode) = 0;
};

}  // namespace lockstep
