// Internal: the movable holds (lockstep/locks/hold.h) of every backend built on a HoldTable
// (memory, MySQL, ZooKeeper, Redlock). A movable hold is a hold of the same table
// whose owner is a number of its own (OwnerKey::new_movable) instead of the calling thread, so
// it goes through the same acquire and release flows, validity, renewal, max_hold and loss
// reporting as a thread's hold; only the owner differs.
//
// Thread safety: a HoldTableHeld is used by one thread at a time (the Hold that owns it); the
// table and the Hold record it points to are shared with the backend's threads as usual.
#pragma once

#include <memory>
#include <stop_token>
#include <string>
#include <utility>

#include "hold_table.h"
#include "lockstep/core/error.h"
#include "lockstep/locks/hold.h"

namespace lockstep::locks_detail {

template <class State>
class HoldTableHeld final : public detail::HeldLock {
public:
    HoldTableHeld(std::shared_ptr<State> s, std::shared_ptr<Hold> hold, OwnerKey owner)
        : s_(std::move(s)), hold_(std::move(hold)), owner_(owner) {}
    void release(UnlockMode mode) override { s_->table.unlock(*s_, hold_->name, hold_->kind, mode, owner_); }
    bool lost() const override { return hold_->lost_or_expired(); }
    // Read holds have no token (distributed_read_write_lock.h), whatever the backend keeps.
    FenceToken fence_token() const override { return hold_->kind == HoldKind::Read ? 0 : hold_->token; }
    std::stop_token stop_token() const override { return hold_->stop.get_token(); }
    const std::string& name() const noexcept override { return hold_->name; }

private:
    std::shared_ptr<State> s_;
    std::shared_ptr<Hold> hold_;
    const OwnerKey owner_;
};

// A new hold of `name` (side `kind`) for an owner of its own, through the backend `*s`, waiting
// until `deadline` at most: the Hold, or an empty one when the deadline passed.
template <class State>
lockstep::Hold acquire_movable(const std::shared_ptr<State>& s, const std::string& name, HoldKind kind,
                               SteadyTime deadline, const LockOptions& options) {
    const OwnerKey owner = OwnerKey::new_movable();
    if (!s->table.lock(*s, name, kind, deadline, options, owner)) return lockstep::Hold();
    auto hold = s->table.find(name, kind, owner);
    // Registered by lock() and removed only by this owner's unlock: found, unless the service
    // went meanwhile (then its close() abandoned it).
    if (!hold) throw LockLostError("lock '" + name + "': the hold ended as it was acquired (the service was destroyed)");
    return lockstep::Hold(std::make_unique<HoldTableHeld<State>>(s, std::move(hold), owner));
}

// acquire_movable until LockOptions::max_wait (TimeoutError after it, naming the lock by `label`).
template <class State>
lockstep::Hold acquire_movable_or_throw(const std::shared_ptr<State>& s, const std::string& name, HoldKind kind,
                                        const LockOptions& options, const char* label) {
    const auto deadline = options.max_wait ? detail::deadline_from_now(*options.max_wait) : SteadyTime::max();
    lockstep::Hold h = acquire_movable(s, name, kind, deadline, options);
    if (!h) throw TimeoutError(std::string(label) + " '" + name + "': not acquired within max_wait");
    return h;
}

}  // namespace lockstep::locks_detail
