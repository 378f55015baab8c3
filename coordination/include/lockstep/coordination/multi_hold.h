// MultiHold: one all-or-nothing acquisition of a MultiLock's names as a movable value, owned by no
// thread (MultiLock::acquire() / try_acquire*()). It is one lockstep::Hold per name, taken in the
// MultiLock's fixed order and released in reverse order, so it has every Hold rule (hold.h,
// docs/holds.md), name by name:
//
//   lockstep::MultiLock both(service, {"account:7", "account:3"});
//   lockstep::MultiHold h = both.acquire();              // or try_acquire(): empty when busy
//   std::thread worker([h = std::move(h)]() mutable {
//       transfer(h.stop_token(), h.fence_token("account:3"), h.fence_token("account:7"));
//       h.release_checked();                              // LockLostError naming the lost names
//   });
//
//   - Never reentrant: each part has an owner of its own, so another acquisition of any of its
//     names (another MultiHold, a Hold, any thread's lock(), the thread that made it) waits while
//     it is held.
//   - fence_token(name): that name's token (new, greater than every earlier token of the name).
//   - lost(): any part is lost, past its validity or past LockOptions::max_hold. stop_token() is
//     requested when the first part is (by the thread that notices it: a watchdog or an expiry
//     thread), not by a release.
//   - release() ends every part (reverse order) and never throws over a loss or a failed release;
//     release_checked() ends every part, then throws LockLostError naming every lost name, or
//     else the first backend error. Either leaves it empty; the destructor releases like release().
//   - An empty MultiHold (default-constructed, moved from, released, or a try_acquire*() that did
//     not get every name): release(), release_checked() and fence_token() throw NotOwnerError;
//     lost() is false; stop_token() has no stop state; names() is empty; the destructor does nothing.
//
// Thread safety: a value: one thread uses it at a time (move it to hand it on); any thread may
// release it. REQUIRES: the service of the MultiLock outlives it.
#pragma once

#include <memory>
#include <stop_token>
#include <string>
#include <vector>

#include "lockstep/locks/hold.h"

namespace lockstep {

class MultiHold {
public:
    MultiHold() noexcept;
    MultiHold(MultiHold&& other) noexcept;
    // Releases the one it held first (as release()).
    MultiHold& operator=(MultiHold&& other) noexcept;
    MultiHold(const MultiHold&) = delete;
    MultiHold& operator=(const MultiHold&) = delete;
    // Releases a MultiHold still held (as release(): reported, never thrown).
    ~MultiHold();

    // True while it holds its names (lost or not): not released, not moved from.
    bool held() const noexcept { return state_ != nullptr; }
    explicit operator bool() const noexcept { return held(); }

    // The names, sorted: the acquisition order. Empty when empty.
    const std::vector<std::string>& names() const noexcept;
    // The fencing token of `name`. NotOwnerError when empty; ConfigError when `name` is not one
    // of names().
    FenceToken fence_token(const std::string& name) const;
    // Any part is known lost, past its validity or past max_hold. No round trip. False when empty.
    bool lost() const;
    // Requested when any part is lost or reaches max_hold. No stop state when empty.
    std::stop_token stop_token() const noexcept;

    // Ends every part, in reverse order; losses and failed releases are reported, not thrown.
    // NotOwnerError when empty.
    void release();
    // The same, then LockLostError naming every lost name, or else the first backend error (every
    // part is forgotten either way). NotOwnerError when empty.
    void release_checked();

private:
    friend class MultiLock;
    // `holds` are held, one per name, in `names` order.
    MultiHold(std::vector<std::string> names, std::vector<Hold> holds);

    struct State;
    std::unique_ptr<State> state_;
};

}  // namespace lockstep
