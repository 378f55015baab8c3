// Hold: one acquisition of a distributed lock as a movable value, owned by no thread. A thread
// pool, a coroutine or a callback can take the work on: move the Hold there and release it there.
//
//   lockstep::Hold h = mutex->acquire();                  // or try_acquire(): empty when busy
//   std::thread worker([h = std::move(h)]() mutable {
//       while (!h.stop_token().stop_requested()) { ... h.fence_token() ... }
//       h.release_checked();                              // LockLostError if it was lost
//   });
//
// A Hold has an owner of its own, distinct from every thread and every other Hold (docs/holds.md):
//   - Never reentrant: a second acquire() of the same lock is another owner and waits (or
//     try_acquire() fails) while this Hold is held, whichever thread asks; so does the thread
//     that made it, and a thread that holds the lock through lock() waits for a Hold like for
//     any other owner, and the other way round.
//   - Its fencing token is new (greater than every earlier token of the name); read holds have 0.
//   - lost(): the hold is known lost or past its validity, or reached LockOptions::max_hold.
//     stop_token() is requested at that moment (by the thread that notices: the backend's
//     watchdog or expiry thread), so work can stop cooperatively; it is not requested by a
//     release.
//   - release() ends it and never throws over a loss or a failed release (reported to on_lost
//     and the log, as unlock() does); release_checked() throws LockLostError (its message names
//     the reason) or the backend's error. Either leaves the Hold empty. The destructor of a
//     Hold still held releases it like release().
//   - server_time_at_grant(): the lock server's clock when it granted this hold, read in the
//     same atomic step as the grant (Redis: TIME inside the acquire script), so a caller that
//     needs the server's time of its acquisition (JobLock's slot) has it without a round trip.
//     Unset where the backend cannot tell (every backend but the Redis lock client's sides).
//   - An empty Hold (default-constructed, moved from, released, or a try_acquire() that failed):
//     release() and release_checked() throw NotOwnerError, fence_token() too; lost() is false;
//     stop_token() has no stop state; the destructor does nothing.
//
// Thread safety: a Hold is a value: one thread uses it at a time (move it to hand it on). Any
// thread may release it. REQUIRES: the service that made the lock outlives the Hold.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

#include "lockstep/locks/lock_errors.h"
#include "lockstep/locks/lock_loss.h"

namespace lockstep {

namespace detail {

// The backend's side of a movable hold: one acquisition keyed by its own owner. Implemented once
// per hold registry (locks/src/hold_table_held.h, the Redis client's registry).
class HeldLock {
public:
    virtual ~HeldLock() = default;
    // Ends the hold (called at most once). UnlockMode as in DistributedMutex::unlock_as.
    virtual void release(UnlockMode mode) = 0;
    virtual bool lost() const = 0;
    virtual FenceToken fence_token() const = 0;
    virtual std::stop_token stop_token() const = 0;
    virtual const std::string& name() const noexcept = 0;
    // The server's clock at the grant, read atomically with it; unset: this backend cannot tell.
    virtual std::optional<std::chrono::system_clock::time_point> server_time_at_grant() const {
        return std::nullopt;
    }
};

}  // namespace detail

class Hold {
public:
    Hold() noexcept = default;
    explicit Hold(std::unique_ptr<detail::HeldLock> held) noexcept : held_(std::move(held)) {}
    Hold(Hold&& other) noexcept = default;
    Hold& operator=(Hold&& other) noexcept;
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    // Releases a hold still held (as release(): reported, never thrown).
    ~Hold();

    // True while this value holds an acquisition (lost or not): it has not been released or moved.
    bool held() const noexcept { return held_ != nullptr; }
    explicit operator bool() const noexcept { return held(); }

    // The hold's fencing token (0 for a read hold). NotOwnerError when empty.
    FenceToken fence_token() const;
    // Known lost, past its validity, or past its max_hold. No round trip. False when empty.
    bool lost() const;
    // Requested when the hold is lost or reaches max_hold. No stop state when empty.
    std::stop_token stop_token() const noexcept;
    // The lock server's clock when it granted this hold (read in the same atomic step); unset
    // when the backend cannot tell. No round trip. NotOwnerError when empty.
    std::optional<std::chrono::system_clock::time_point> server_time_at_grant() const;
    // The lock's name. NotOwnerError when empty.
    const std::string& name() const;

    // Ends the hold; a loss or a failed release is reported, not thrown. NotOwnerError when empty.
    void release();
    // Ends the hold; LockLostError when it was lost, the backend's error when the release failed
    // (the hold is forgotten either way). NotOwnerError when empty.
    void release_checked();

private:
    void release_as(UnlockMode mode);
    std::unique_ptr<detail::HeldLock> held_;
};

}  // namespace lockstep
