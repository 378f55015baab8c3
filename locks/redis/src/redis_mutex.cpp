#include "lockstep/locks/redis_mutex.h"

#include <array>
#include <string_view>

#include "fair_mutex_side.h"
#include "lock_client_impl.h"
#include "lock_scripts.h"
#include "lockstep/core/error.h"

namespace lockstep {

namespace {

// The mutex as a LockSide: one hash key, a waiter queue, one wake-up channel per client. Every
// key, the channel and the fixed script arguments are made here, once per RedisMutex; a call
// passes views of them (RedisClient::eval_views, no copies).
class MutexSide final : public LockSide {
public:
    MutexSide(RedisLockClient::Impl& impl, const LockKeys& keys, HoldSettings settings)
        : LockSide(std::move(settings)),
          impl_(impl),
          name_(keys.name()),
          key_(keys.mutex()),
          fence_(keys.fence()),
          queue_(keys.mutex_queue()),
          queue_expiry_(keys.mutex_queue_expiry()),
          channel_(keys.mutex_channel(impl.id)),
          lease_ms_(ms(this->settings().lease)),
          fence_ttl_ms_(ms(impl.options.fence_counter_ttl)),
          grace_ms_(ms(impl.options.waiter_grace)),
          handoff_window_ms_(ms(impl.options.handoff_window)),
          handoff_after_us_(std::to_string(impl.options.handoff_after.count() * 1000)),
          gate_(impl.options.local_gate ? impl.gates.get(key_) : nullptr) {}

    const char* kind() const override { return "mutex"; }
    const SideFaultPoints& fault_points() const override {
        static const SideFaultPoints points{"locks.mutex.before_acquire", "locks.mutex.after_acquire",
                                            "locks.mutex.before_release", "locks.mutex.after_release"};
        return points;
    }
    const std::string& name() const override { return name_; }
    const std::string& hold_key() const override { return key_; }
    const std::string& wait_channel() const override { return channel_; }

    // A plain try sends 2 keys and 3 arguments; only a waiter adds the queue's (lock_scripts.h).
    AttemptResult attempt(const std::string& owner, std::chrono::milliseconds lease, bool expect_held,
                          const WaitTicket* ticket) const override {
        // A re-entry through another RedisMutex of the name keeps the first hold's lease.
        const std::string other_lease = lease == settings().lease ? std::string() : ms(lease);
        const std::string_view lease_ms = other_lease.empty() ? std::string_view(lease_ms_) : std::string_view(other_lease);
        const std::string_view third = expect_held ? std::string_view("re") : std::string_view(fence_ttl_ms_);
        if (!ticket) {
            const std::array<std::string_view, 2> keys{key_, fence_};
            const std::array<std::string_view, 3> args{owner, lease_ms, third};
            return parse_attempt(impl_.redis.eval_views(lock_scripts::mutex_acquire(), keys, args));
        }
        const std::string wait_left = std::to_string(ticket->wait_left_ms);
        const std::array<std::string_view, 4> keys{key_, fence_, queue_, queue_expiry_};
        const std::array<std::string_view, 7> args{owner,          lease_ms,  third, ticket->waiter_id,
                                                   ticket->queue_score, wait_left, grace_ms_};
        return parse_attempt(impl_.redis.eval_views(lock_scripts::mutex_acquire(), keys, args));
    }

    void leave(const std::string&, const WaitTicket& ticket) const override {
        const std::array<std::string_view, 3> keys{key_, queue_, queue_expiry_};
        const std::array<std::string_view, 3> args{ticket.waiter_id, handoff_window_ms_, handoff_after_us_};
        impl_.redis.eval_views(lock_scripts::mutex_leave_queue(), keys, args);
    }

    int release(const std::string& owner, bool last) const override {
        const std::array<std::string_view, 3> keys{key_, queue_, queue_expiry_};
        const std::array<std::string_view, 4> args{owner, last ? "1" : "0", handoff_window_ms_, handoff_after_us_};
        return static_cast<int>(impl_.redis.eval_views(lock_scripts::mutex_release(), keys, args).integer());
    }

    ScriptCall renew_call(const std::string& owner, std::chrono::milliseconds lease) const override {
        return {&lock_scripts::hash_hold_renew(), {key_}, {owner, ms(lease)}};
    }
    ScriptCall release_call(const std::string& owner) const override {
        return {&lock_scripts::mutex_release(), {key_, queue_, queue_expiry_}, {owner, "1", handoff_window_ms_, handoff_after_us_}};
    }
    WakeRule wake_rule() const override { return WakeRule::NamedWaiter; }
    LocalGate* gate() const override { return gate_.get(); }

private:
    RedisLockClient::Impl& impl_;
    const std::string name_, key_, fence_, queue_, queue_expiry_, channel_;
    const std::string lease_ms_, fence_ttl_ms_, grace_ms_;
    const std::string handoff_window_ms_, handoff_after_us_;  // the hand-off (wake_next)
    // Shared by every lock object of this name on this client (LocalGateTable), kept alive by
    // this side and so by every hold of it.
    const std::shared_ptr<LocalGate> gate_;
};

}  // namespace

// The lock's policy (lease, renewal, loss callback) and its keys are fixed here, once.
RedisMutex::RedisMutex(RedisLockClient& client, std::string name, MutexOptions options)
    : impl_(client.impl_), keys_(client.keys(name)), options_(std::move(options)) {
    if (options_.lease < std::chrono::milliseconds(3)) throw ConfigError("lease", "must be at least 3 ms");
    side_ = std::make_shared<MutexSide>(*impl_, keys_, HoldSettings{options_.lease, options_.renew, options_.on_lost, options_.max_hold});
}

RedisMutex::RedisMutex(RedisLockClient& client, std::string name, MutexOptions options, const RedisFairLockOptions& fair)
    : impl_(client.impl_), keys_(client.keys(name)), options_(std::move(options)) {
    if (options_.lease < std::chrono::milliseconds(3)) throw ConfigError("lease", "must be at least 3 ms");
    side_ = make_fair_mutex_side(*impl_, keys_, HoldSettings{options_.lease, options_.renew, options_.on_lost, options_.max_hold},
                                 fair);
}

RedisMutex::~RedisMutex() = default;

void RedisMutex::lock() {
    const auto now = std::chrono::steady_clock::now();
    const SteadyTime deadline = options_.max_wait ? now + *options_.max_wait : SteadyTime::max();
    if (!impl().acquire(side_, deadline)) {
        throw TimeoutError("lock '" + keys_.name() + "' not acquired within max_wait (" +
                           std::to_string(options_.max_wait->count()) + " ms)");
    }
}

bool RedisMutex::try_lock() {
    return impl().acquire(side_, std::nullopt);
}

bool RedisMutex::try_lock_until_steady(std::chrono::steady_clock::time_point deadline) {
    return impl().acquire(side_, deadline);
}

Hold RedisMutex::acquire() {
    const SteadyTime deadline =
        options_.max_wait ? std::chrono::steady_clock::now() + *options_.max_wait : SteadyTime::max();
    Hold h = impl().acquire_movable(side_, deadline);
    if (!h) {
        throw TimeoutError("lock '" + keys_.name() + "' not acquired within max_wait (" +
                           std::to_string(options_.max_wait->count()) + " ms)");
    }
    return h;
}

Hold RedisMutex::try_acquire_until_steady(std::chrono::steady_clock::time_point deadline) {
    return impl().acquire_movable(side_, deadline);  // min (try_acquire()): one attempt
}

void RedisMutex::unlock_as(UnlockMode mode) { impl().release(*side_, mode == UnlockMode::Throw); }

bool RedisMutex::lost() const {
    return view_hold(impl(), side_->hold_key()).lost;
}
int RedisMutex::hold_count() const {
    return view_hold(impl(), side_->hold_key()).count;
}

FenceToken RedisMutex::fence_token() const {
    HoldView v = view_hold(impl(), side_->hold_key());
    if (!v.exists)
        throw NotOwnerError("lock '" + keys_.name() + "': fence_token() by a thread that does not hold it");
    return v.token;
}

}  // namespace lockstep
