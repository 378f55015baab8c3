// RedisMutex: a reentrant distributed mutex on one Redis server, the `redis` backend's
// DistributedMutex (distributed_mutex.h: RedisLockService::make_mutex returns one), meeting the
// standard TimedLockable requirements (lock, try_lock, try_lock_for, try_lock_until, unlock), so
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

#include "lockstep/locks/distributed_mutex.h"
#include "lockstep/locks/hold.h"
#include "lockstep/locks/lock_client.h"
#include "lockstep/locks/lock_options.h"

namespace lockstep {

class LockSide;
struct RedisFairLockOptions;

// A RedisMutex's options are the neutral LockOptions (lock_options.h: lease, renew, max_wait,
// on_lost, max_hold); the name stays for code written against it.
using MutexOptions = LockOptions;

class RedisMutex final : public DistributedMutex {
public:
    // REQUIRES: name not empty; lease >= 3 ms.
    RedisMutex(RedisLockClient& client, std::string name, MutexOptions options = {});
    ~RedisMutex() override;
    RedisMutex(const RedisMutex&) = delete;
    RedisMutex& operator=(const RedisMutex&) = delete;

    // Blocks until acquired (or options.max_wait passes: TimeoutError).
    void lock() override;
    // One attempt, no waiting. With the local gate (LockClientOptions::local_gate, the default)
    // it fails at once, sending nothing, while another thread of this client holds or is
    // acquiring this mutex (a spurious failure TimedLockable allows); try_lock_for/until wait
    // for that thread at the gate until their deadline.
    bool try_lock() override;
    bool try_lock_until_steady(std::chrono::steady_clock::time_point deadline) override;
    // unlock() (DistributedMutex): REQUIRES the calling thread holds it (NotOwnerError
    // otherwise). Never throws because the hold was lost or the release failed: that is reported
    // (see above). The hold is forgotten. unlock_checked(): the same, and then LockLostError if
    // the hold was lost (lease ran out, server restarted, client destroyed), or the Redis error if
    // the release failed. After it threw, the next unlock() of this lock by this thread (a std
    // guard's destructor) is a no-op.

    // Movable holds (lockstep/locks/hold.h, docs/holds.md): an owner of their own, never a
    // re-entry of a thread's hold. acquire() waits until max_wait (TimeoutError); try_acquire*()
    // return an empty Hold when busy or at the deadline.
    Hold acquire() override;
    Hold try_acquire_until_steady(std::chrono::steady_clock::time_point deadline) override;

    // True when the calling thread holds this lock in its own view and the hold is known lost
    // (renewal found it gone), or its lease ran out without a renewal, measured conservatively
    // on the client (a fixed lease, or a stalled or failing watchdog). No round trip.
    bool lost() const override;
    // The calling thread's reentrant count; 0 when it does not hold the lock.
    int hold_count() const override;
    // The fencing token of the calling thread's hold. REQUIRES: held (NotOwnerError otherwise).
    FenceToken fence_token() const override;

    const std::string& name() const noexcept override { return keys_.name(); }
    const LockKeys& keys() const noexcept { return keys_; }
    const MutexOptions& options() const noexcept { return options_; }

protected:
    void unlock_as(UnlockMode mode) override;

private:
    friend class RedisFairLockService;
    // RedisFairLockService's mutex: this lock over the client's fair side (FIFO, grant on
    // release; redis_fair_lock_service.h).
    RedisMutex(RedisLockClient& client, std::string name, MutexOptions options, const RedisFairLockOptions& fair);

    RedisLockClient::Impl& impl() const noexcept { return *impl_; }
    std::shared_ptr<RedisLockClient::Impl> impl_;
    LockKeys keys_;
    MutexOptions options_;
    // Keys, channel and policy of this lock, built once (locks/redis/src/redis_mutex.cpp); a
    // hold shares it with the client's watchdog.
    std::shared_ptr<const LockSide> side_;
};

}  // namespace lockstep
