// Movable holds (lockstep/locks/hold.h) of every Redis lock side: a hold of the client's one
// registry whose owner is a number of its own (OwnerKey::new_movable) instead of the calling
// thread's, so the acquire and release flows, the watchdog's renewals, max_hold and loss
// reporting are the thread-owned hold's, unchanged; only the owner value differs.
#include <chrono>
#include <optional>
#include <utility>

#include "lock_client_impl.h"
#include "lockstep/core/error.h"

namespace lockstep {

namespace {

class RedisHeld final : public detail::HeldLock {
public:
    RedisHeld(std::shared_ptr<RedisLockClient::Impl> impl, std::shared_ptr<const LockSide> side, OwnerKey owner,
              std::shared_ptr<RedisHold> hold)
        : impl_(std::move(impl)), side_(std::move(side)), owner_(owner), hold_(std::move(hold)) {}

    void release(UnlockMode mode) override { impl_->release(*side_, mode == UnlockMode::Throw, owner_); }
    bool lost() const override {
        MutexLock lock(impl_->mutex);
        return hold_->lost || SteadyClock::now() >= hold_->ends_at();
    }
    FenceToken fence_token() const override {
        MutexLock lock(impl_->mutex);
        return hold_->token;
    }
    std::stop_token stop_token() const override { return hold_->stop.get_token(); }
    const std::string& name() const noexcept override { return side_->name(); }
    std::optional<std::chrono::system_clock::time_point> server_time_at_grant() const override {
        // Set once, before the hold was registered and handed here.
        if (hold_->granted_at_us <= 0) return std::nullopt;
        const std::chrono::microseconds since_epoch(hold_->granted_at_us);
        return std::chrono::system_clock::time_point(
            std::chrono::duration_cast<std::chrono::system_clock::duration>(since_epoch));
    }

private:
    std::shared_ptr<RedisLockClient::Impl> impl_;
    std::shared_ptr<const LockSide> side_;
    const OwnerKey owner_;
    std::shared_ptr<RedisHold> hold_;
};

}  // namespace

lockstep::Hold RedisLockClient::Impl::acquire_movable(const std::shared_ptr<const LockSide>& side,
                                                      std::optional<SteadyTime> deadline) {
    // try_acquire*() passes the deadline SteadyTime::min(): one attempt and no wait at a gate
    // either, as try_lock().
    if (deadline == SteadyTime::min()) deadline.reset();
    const OwnerKey owner = OwnerKey::new_movable();
    std::shared_ptr<RedisHold> hold;
    if (!acquire(side, deadline, owner, &hold)) return lockstep::Hold();
    if (!hold) throw ProtocolError("lock '" + side->name() + "': a new movable hold was not registered");
    return lockstep::Hold(std::make_unique<RedisHeld>(shared_from_this(), side, owner, std::move(hold)));
}

}  // namespace lockstep
