#include "lockstep/locks/redis_mutex.h"

#include "lock_client_impl.h"
#include "lock_scripts.h"
#include "lockstep/core/error.h"

namespace lockstep {

namespace {

// The mutex as a LockSide: one hash key, a waiter queue, one wake-up channel per client.
class MutexSide final : public LockSide {
public:
    MutexSide(RedisLockClient::Impl& impl, const LockKeys& keys)
        : impl_(impl), keys_(keys), key_(keys.mutex()) {}

    const char* kind() const override { return "mutex"; }
    const SideFaultPoints& fault_points() const override {
        static const SideFaultPoints points{"locks.mutex.before_acquire", "locks.mutex.after_acquire",
                                            "locks.mutex.before_release", "locks.mutex.after_release"};
        return points;
    }
    const std::string& name() const override { return keys_.name(); }
    const std::string& hold_key() const override { return key_; }
    std::string wait_channel() const override { return keys_.mutex_channel(impl_.id); }

    AttemptResult attempt(const std::string& owner, std::chrono::milliseconds lease, bool expect_held,
                          const WaitTicket* ticket) override {
        return parse_attempt(impl_.redis.eval(
            lock_scripts::mutex_acquire(),
            {key_, keys_.fence(), keys_.mutex_queue(), keys_.mutex_queue_expiry()},
            {owner, ms(lease), expect_held ? "1" : "0", ticket ? ticket->waiter_id : "",
             ticket ? ticket->queue_score : "", ticket ? std::to_string(ticket->wait_left_ms) : "-1",
             ms(impl_.options.waiter_grace), ms(impl_.options.fence_counter_ttl)}));
    }

    void leave(const std::string&, const WaitTicket& ticket) override {
        impl_.redis.eval(lock_scripts::mutex_leave_queue(),
                         {key_, keys_.mutex_queue(), keys_.mutex_queue_expiry()}, {ticket.waiter_id});
    }

    int release(const std::string& owner, bool last) override {
        return static_cast<int>(impl_.redis
                                    .eval(lock_scripts::mutex_release(),
                                          {key_, keys_.mutex_queue(), keys_.mutex_queue_expiry()},
                                          {owner, last ? "1" : "0"})
                                    .integer());
    }

    RenewCall renew_call(const std::string& owner, std::chrono::milliseconds lease) const override {
        return {&lock_scripts::hash_hold_renew(), {key_}, {owner, ms(lease)}};
    }
    RenewCall release_call(const std::string& owner) const override {
        return {&lock_scripts::mutex_release(), {key_, keys_.mutex_queue(), keys_.mutex_queue_expiry()}, {owner, "1"}};
    }
    WakeRule wake_rule() const override { return WakeRule::NamedWaiter; }

private:
    RedisLockClient::Impl& impl_;
    const LockKeys& keys_;
    std::string key_;
};

}  // namespace

RedisMutex::RedisMutex(RedisLockClient& client, std::string name, MutexOptions options)
    : impl_(client.impl_), keys_(client.keys(name)), options_(std::move(options)) {
    if (options_.lease < std::chrono::milliseconds(3)) throw ConfigError("lease", "must be at least 3 ms");
}

namespace {
HoldSettings settings_of(const MutexOptions& o) {
    return {o.lease, o.renew, o.on_lost};
}
}  // namespace

void RedisMutex::lock() {
    MutexSide side(impl(), keys_);
    const auto now = std::chrono::steady_clock::now();
    const SteadyTime deadline = options_.max_wait ? now + *options_.max_wait : SteadyTime::max();
    if (!impl().acquire(side, settings_of(options_), deadline)) {
        throw TimeoutError("lock '" + keys_.name() + "' not acquired within max_wait (" +
                           std::to_string(options_.max_wait->count()) + " ms)");
    }
}

bool RedisMutex::try_lock() {
    MutexSide side(impl(), keys_);
    return impl().acquire(side, settings_of(options_), std::nullopt);
}

bool RedisMutex::try_lock_until_steady(std::chrono::steady_clock::time_point deadline) {
    MutexSide side(impl(), keys_);
    return impl().acquire(side, settings_of(options_), deadline);
}

void RedisMutex::unlock() {
    MutexSide side(impl(), keys_);
    impl().release(side, false);
}

void RedisMutex::unlock_checked() {
    MutexSide side(impl(), keys_);
    impl().release(side, true);
}

bool RedisMutex::lost() const {
    return view_hold(impl(), keys_.mutex()).lost;
}
bool RedisMutex::held_by_this_thread() const {
    return view_hold(impl(), keys_.mutex()).exists;
}
int RedisMutex::hold_count() const {
    return view_hold(impl(), keys_.mutex()).count;
}

FenceToken RedisMutex::fence_token() const {
    HoldView v = view_hold(impl(), keys_.mutex());
    if (!v.exists)
        throw NotOwnerError("lock '" + keys_.name() + "': fence_token() by a thread that does not hold it");
    return v.token;
}

}  // namespace lockstep
