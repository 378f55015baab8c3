// RedisMutex: a reentrant distributed mutex on one Redis server, meeting the standard
// TimedLockable requirements (lock, try_lock, try_lock_for, try_lock_until, unlock), so
// std::unique_lock, std::scoped_lock and std::lock_guard work with it.
//
//   lockstep::RedisMutex m(locks, "product:42");            // 30 s lease, renewed
//   {
//       std::unique_lock hold(m);
//       lockstep::fenced_update(tx, 42, m.fence_token(),
//                               {.assignments = "stock = stock - ?", .params = {1}});
//       hold.unlock();              // never throws for a lost hold: reported instead
//   }
//
// Semantics (details and the races each step closes in docs/locks.md):
//   - One acquire script and one release script (L1-L4). The hold is a Redis hash field
//     owner -> count; the owner is "<client id>:<owner number>:<hold number>" (RedisLockClient;
//     the owner number is the thread's, or a movable Hold's: acquire(), docs/holds.md).
//   - Reentrant (L6): the thread that holds it may lock it again (through this or any other
//     RedisMutex object of the same client and name); it is free after as many unlocks.
//   - Lease: `lease` (default 30 s) renewed by the client's watchdog every lease/3 while held
//     (L5); or, with `renew = false`, a fixed lease that simply runs out.
//   - Waiting (L7, L9): a waiter subscribes before it retries, then sleeps until a release
//     wakes it or the lock's remaining TTL passes, whichever is first. A release wakes exactly
//     one waiter (the oldest live one, across all processes), not all of them.
//   - Fencing: every new acquisition gets a token greater than every earlier token of this
//     name; pass it to guarded writes (db/fenced_write.h) so a paused holder's late write is
//     refused (L5, L8).
//   - Errors, never a silent success (L10): unlock() by a thread that does not hold the lock
//     throws NotOwnerError (nothing is sent to Redis, nothing is deleted). A hold that was lost
//     (lease ran out, key deleted, redis-server restarted) is reported, never passed silently:
//     on_lost (once), lost(), a warning in the log and the client's `losses` and
//     `unlocks_of_lost_holds` counters. lock()/try_lock() re-entering a lost hold throws
//     LockLostError. Redis errors of lock() surface as ConnectionError / TimeoutError /
//     ProtocolError.
//
// Unlock and RAII guards: std guards call unlock() from their noexcept
// destructor, so unlock() never throws because the hold was lost or Redis could not be reached
// (the release failed: the lease ends the hold; logged and counted as `unlock_errors`). A lost
// lock at the end of a std::scoped_lock therefore never terminates the process. Callers who want
// the loss as an exception end the section with unlock_checked(): LockLostError when the hold
// was lost, the Redis error when the release failed. What protects the data is not the unlock
// but fencing: a write checked against fence_token() is refused once a newer holder wrote
// (db/fenced_write.h); an unlock, checked or not, only reports afterwards what already happened.
//
// Thread safety: one RedisMutex may be shared by many threads (like std::mutex); each thread's
// hold is its own. It may outlive its RedisLockClient (then lock() throws LockClientClosedError
// and unlock() is a no-op; see lock_client.h).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "lockstep/locks/hold.h"
#include "lockstep/locks/lock_client.h"

namespace lockstep {

class LockSide;

namespace detail {
// now + d on the steady clock, saturating at time_point::max() (try_lock_for(hours::max())).
template <class Rep, class Period>
std::chrono::steady_clock::time_point steady_deadline_after(const std::chrono::duration<Rep, Period>& d) {
    using namespace std::chrono;
    const auto now = steady_clock::now();
    if (d <= d.zero()) return now;
    if (duration<double>(d) >= duration<double>(steady_clock::time_point::max() - now)) {
        return steady_clock::time_point::max();
    }
    return now + ceil<steady_clock::duration>(d);
}
}  // namespace detail

struct MutexOptions {
    // Lease of each hold: the server deletes the lock this long after the last acquisition or
    // renewal, so a holder that dies blocks others for at most this long (L1).
    std::chrono::milliseconds lease{30000};
    // Renew the lease every lease/3 while held (watchdog). False: a fixed lease; a critical
    // section longer than it loses the lock (reported through on_lost and lost()).
    bool renew = true;
    // lock() gives up with TimeoutError after waiting this long; unset: it waits indefinitely.
    std::optional<std::chrono::milliseconds> max_wait;
    // Called once when a hold of this mutex is lost (after the client's on_lost).
    std::function<void(const LockLoss&)> on_lost;
    // A cap on every hold (LockOptions::max_hold, docs/holds.md); unset: none.
    std::optional<std::chrono::milliseconds> max_hold;
};

class RedisMutex {
public:
    // REQUIRES: name not empty; lease >= 3 ms.
    RedisMutex(RedisLockClient& client, std::string name, MutexOptions options = {});
    ~RedisMutex();
    RedisMutex(const RedisMutex&) = delete;
    RedisMutex& operator=(const RedisMutex&) = delete;

    // Blocks until acquired (or options.max_wait passes: TimeoutError).
    void lock();
    // One attempt, no waiting. With the local gate (LockClientOptions::local_gate, the default)
    // it fails at once, sending nothing, while another thread of this client holds or is
    // acquiring this mutex (a spurious failure TimedLockable allows); try_lock_for/until wait
    // for that thread at the gate until their deadline.
    bool try_lock();
    template <class Rep, class Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
        return try_lock_until_steady(detail::steady_deadline_after(timeout));
    }
    template <class Clock, class Duration>
    bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
        return try_lock_until_steady(detail::steady_deadline_after(deadline - Clock::now()));
    }
    // REQUIRES: the calling thread holds it (NotOwnerError otherwise). Never throws because the
    // hold was lost or the release failed: that is reported (see above). The hold is forgotten.
    void unlock();
    // unlock(), and then LockLostError if the hold was lost (lease ran out, server restarted,
    // client destroyed), or the Redis error if the release failed. After it threw, the next
    // unlock() of this lock by this thread (a std guard's destructor) is a no-op.
    void unlock_checked();

    // Movable holds (lockstep/locks/hold.h, docs/holds.md): an owner of their own, never a
    // re-entry of a thread's hold. acquire() waits until max_wait (TimeoutError); try_acquire*()
    // return an empty Hold when busy or at the deadline.
    Hold acquire();
    Hold try_acquire();
    Hold try_acquire_until_steady(std::chrono::steady_clock::time_point deadline);

    // True when the calling thread holds this lock in its own view and the hold is known lost
    // (renewal found it gone), or its lease ran out without a renewal, measured conservatively
    // on the client (a fixed lease, or a stalled or failing watchdog). No round trip.
    bool lost() const;
    // True when the calling thread holds it (or held it and has not unlocked a lost hold yet).
    bool held_by_this_thread() const;
    // The calling thread's reentrant count; 0 when it does not hold the lock.
    int hold_count() const;
    // The fencing token of the calling thread's hold. REQUIRES: held (NotOwnerError otherwise).
    FenceToken fence_token() const;

    const std::string& name() const noexcept { return keys_.name(); }
    const LockKeys& keys() const noexcept { return keys_; }
    const MutexOptions& options() const noexcept { return options_; }

private:
    bool try_lock_until_steady(std::chrono::steady_clock::time_point deadline);
    RedisLockClient::Impl& impl() const noexcept { return *impl_; }
    std::shared_ptr<RedisLockClient::Impl> impl_;
    LockKeys keys_;
    MutexOptions options_;
    // Keys, channel and policy of this lock, built once (locks/src/redis_mutex.cpp); a hold
    // shares it with the client's watchdog.
    std::shared_ptr<const LockSide> side_;
};

}  // namespace lockstep
