// Internal: the DistributedMutex of every backend built on a HoldTable (memory,
// MySQL, ZooKeeper, Redlock). The lock is the Mutex hold of `name` in `State::table`, acquired
// and released through the State (the backend's HoldBackend), so a new backend writes its
// acquire/release/abandon and gets the standard lock operations, reentrancy, loss reporting and
// the typed errors from here and hold_table.h, once; and movable holds (hold_table_held.h).
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "hold_table.h"
#include "hold_table_held.h"
#include "lockstep/core/error.h"
#include "lockstep/locks/distributed_mutex.h"

namespace lockstep::locks_detail {

// `label` names the lock in errors ("MySQL lock", "ZooKeeper lock", ...).
template <class State>
class HoldTableMutex final : public DistributedMutex {
public:
    HoldTableMutex(std::shared_ptr<State> s, std::string name, LockOptions o, const char* label)
        : s_(std::move(s)), name_(std::move(name)), o_(std::move(o)), label_(label) {}

    void lock() override {
        const auto deadline = o_.max_wait ? detail::deadline_from_now(*o_.max_wait) : SteadyTime::max();
        if (!try_lock_until_steady(deadline)) {
            throw TimeoutError(std::string(label_) + " '" + name_ + "': not acquired within max_wait");
        }
    }
    bool try_lock() override { return try_lock_until_steady(SteadyTime::min()); }
    bool try_lock_until_steady(SteadyTime deadline) override {
        return s_->table.lock(*s_, name_, HoldKind::Mutex, deadline, o_);
    }
    void unlock_as(UnlockMode mode) override { s_->table.unlock(*s_, name_, HoldKind::Mutex, mode); }
    lockstep::Hold acquire() override { return acquire_movable_or_throw(s_, name_, HoldKind::Mutex, o_, label_); }
    lockstep::Hold try_acquire_until_steady(SteadyTime deadline) override {
        return acquire_movable(s_, name_, HoldKind::Mutex, deadline, o_);
    }
    bool lost() const override { return s_->table.lost(name_, HoldKind::Mutex); }
    int hold_count() const override { return s_->table.count(name_, HoldKind::Mutex); }
    FenceToken fence_token() const override { return s_->table.token(name_, HoldKind::Mutex); }
    const std::string& name() const noexcept override { return name_; }

private:
    std::shared_ptr<State> s_;
    std::string name_;
    LockOptions o_;
    const char* label_;
};

}  // namespace lockstep::locks_detail
