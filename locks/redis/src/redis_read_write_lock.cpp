#include "lockstep/locks/redis_read_write_lock.h"

#include "lock_client_impl.h"
#include "lock_scripts.h"
#include "lockstep/core/error.h"

namespace lockstep {

namespace {

// The read side: a reader-count hash plus a zset of each reader's own lease. A release is
// announced to all of this lock's waiters (waiting readers may all read together).
class ReadSide final : public LockSide {
public:
    ReadSide(RedisLockClient::Impl& impl, const LockKeys& keys, HoldSettings settings)
        : LockSide(std::move(settings)), impl_(impl), keys_(keys), key_(keys.rw_readers()), channel_(keys.rw_channel()) {}

    const char* kind() const override { return "read"; }
    std::string sibling_hold_key() const override { return keys_.rw_writer(); }
    const SideFaultPoints& fault_points() const override {
        static const SideFaultPoints points{"locks.read.before_acquire", "locks.read.after_acquire",
                                            "locks.read.before_release", "locks.read.after_release"};
        return points;
    }
    const std::string& name() const override { return keys_.name(); }
    const std::string& hold_key() const override { return key_; }
    const std::string& wait_channel() const override { return channel_; }

    AttemptResult attempt(const std::string& owner, std::chrono::milliseconds lease, bool expect_held,
                          const WaitTicket* ticket) const override {
        return parse_attempt(
            impl_.redis.eval(lock_scripts::rw_read_acquire(),
                             {keys_.rw_writer(), key_, keys_.rw_reader_expiry(), keys_.rw_writer_claims(),
                              keys_.rw_reader_claims(), keys_.rw_claim_expiry()},
                             {owner, ms(lease), expect_held ? "1" : "0", ticket ? "1" : "0",
                              ticket ? std::to_string(ticket->wait_left_ms) : "-1",
                              ms(impl_.options.claim_refresh), ms(impl_.options.waiter_grace)}));
    }
    void leave(const std::string& owner, const WaitTicket&) const override {
        impl_.redis.eval(lock_scripts::rw_leave(), {keys_.rw_reader_claims(), keys_.rw_claim_expiry()},
                         {owner, "r:", keys_.rw_channel()});
    }
    int release(const std::string& owner, bool last) const override {
        return static_cast<int>(impl_.redis
                                    .eval(lock_scripts::rw_read_release(), {key_, keys_.rw_reader_expiry()},
                                          {owner, last ? "1" : "0", keys_.rw_channel()})
                                    .integer());
    }
    ScriptCall renew_call(const std::string& owner, std::chrono::milliseconds lease) const override {
        return {&lock_scripts::rw_read_renew(), {key_, keys_.rw_reader_expiry()}, {owner, ms(lease)}};
    }
    ScriptCall release_call(const std::string& owner) const override {
        return {&lock_scripts::rw_read_release(), {key_, keys_.rw_reader_expiry()}, {owner, "1", keys_.rw_channel()}};
    }
    WakeRule wake_rule() const override { return WakeRule::Broadcast; }

private:
    RedisLockClient::Impl& impl_;
    const LockKeys keys_;  // a copy: a hold keeps the side alive after the lock object is gone
    const std::string key_, channel_;
};

// The write side: like a mutex hash. Waiting readers and writers take turns by claim arrival.
class WriteSide final : public LockSide {
public:
    WriteSide(RedisLockClient::Impl& impl, const LockKeys& keys, HoldSettings settings)
        : LockSide(std::move(settings)), impl_(impl), keys_(keys), key_(keys.rw_writer()), channel_(keys.rw_channel()) {}

    const char* kind() const override { return "write"; }
    std::string sibling_hold_key() const override { return keys_.rw_readers(); }
    const SideFaultPoints& fault_points() const override {
        static const SideFaultPoints points{"locks.write.before_acquire", "locks.write.after_acquire",
                                            "locks.write.before_release", "locks.write.after_release"};
        return points;
    }
    const std::string& name() const override { return keys_.name(); }
    const std::string& hold_key() const override { return key_; }
    const std::string& wait_channel() const override { return channel_; }

    AttemptResult attempt(const std::string& owner, std::chrono::milliseconds lease, bool expect_held,
                          const WaitTicket* ticket) const override {
        return parse_attempt(impl_.redis.eval(
            lock_scripts::rw_write_acquire(),
            {key_, keys_.rw_readers(), keys_.rw_reader_expiry(), keys_.rw_writer_claims(),
             keys_.rw_reader_claims(), keys_.rw_claim_expiry(), keys_.fence()},
            {owner, ms(lease), expect_held ? "1" : "0", ticket ? "1" : "0",
             ticket ? std::to_string(ticket->wait_left_ms) : "-1", ms(impl_.options.claim_refresh),
             ms(impl_.options.waiter_grace), ms(impl_.options.fence_counter_ttl)}));
    }
    void leave(const std::string& owner, const WaitTicket&) const override {
        impl_.redis.eval(lock_scripts::rw_leave(), {keys_.rw_writer_claims(), keys_.rw_claim_expiry()},
                         {owner, "w:", keys_.rw_channel()});
    }
    int release(const std::string& owner, bool last) const override {
        return static_cast<int>(
            impl_.redis
                .eval(lock_scripts::rw_write_release(), {key_}, {owner, last ? "1" : "0", keys_.rw_channel()})
                .integer());
    }
    ScriptCall renew_call(const std::string& owner, std::chrono::milliseconds lease) const override {
        return {&lock_scripts::hash_hold_renew(), {key_}, {owner, ms(lease)}};
    }
    ScriptCall release_call(const std::string& owner) const override {
        return {&lock_scripts::rw_write_release(), {key_}, {owner, "1", keys_.rw_channel()}};
    }
    WakeRule wake_rule() const override { return WakeRule::Broadcast; }

private:
    RedisLockClient::Impl& impl_;
    const LockKeys keys_;  // a copy: a hold keeps the side alive after the lock object is gone
    const std::string key_, channel_;
};

HoldSettings settings_of(const ReadWriteLockOptions& o) {
    return {o.lease, o.renew, o.on_lost, o.max_hold};
}

}  // namespace

RedisReadWriteLock::RedisReadWriteLock(RedisLockClient& client, std::string name,
                                       ReadWriteLockOptions options)
    : impl_(client.impl_), keys_(client.keys(name)), options_(std::move(options)) {
    if (options_.lease < std::chrono::milliseconds(3)) throw ConfigError("lease", "must be at least 3 ms");
    read_side_ = std::make_shared<ReadSide>(*impl_, keys_, settings_of(options_));
    write_side_ = std::make_shared<WriteSide>(*impl_, keys_, settings_of(options_));
}

RedisReadWriteLock::~RedisReadWriteLock() = default;

void RedisReadWriteLock::check_upgrade() const {
    // Refused here, without a round trip, and again by the acquire script.
    if (read_hold_count() > 0 && write_hold_count() == 0) {
        throw LockUpgradeError("lock '" + keys_.name() +
                               "': this thread holds the read side; read -> write upgrade is refused "
                               "(release the read lock first, then re-check what was read)");
    }
}

bool RedisReadWriteLock::try_lock_until_steady(SteadyTime deadline) {
    check_upgrade();
    return impl().acquire(write_side_, deadline);
}

bool RedisReadWriteLock::try_lock_shared_until_steady(SteadyTime deadline) {
    return impl().acquire(read_side_, deadline);
}

void RedisReadWriteLock::lock() {
    const SteadyTime deadline =
        options_.max_wait ? SteadyClock::now() + *options_.max_wait : SteadyTime::max();
    if (!try_lock_until_steady(deadline)) {
        throw TimeoutError("write lock '" + keys_.name() + "' not acquired within max_wait");
    }
}

bool RedisReadWriteLock::try_lock() {
    check_upgrade();
    return impl().acquire(write_side_, std::nullopt);
}

Hold RedisReadWriteLock::acquire() {
    const SteadyTime deadline = options_.max_wait ? SteadyClock::now() + *options_.max_wait : SteadyTime::max();
    Hold h = impl().acquire_movable(write_side_, deadline);
    if (!h) throw TimeoutError("write lock '" + keys_.name() + "' not acquired within max_wait");
    return h;
}
Hold RedisReadWriteLock::try_acquire_until_steady(SteadyTime deadline) {
    return impl().acquire_movable(write_side_, deadline);
}
Hold RedisReadWriteLock::acquire_shared() {
    const SteadyTime deadline = options_.max_wait ? SteadyClock::now() + *options_.max_wait : SteadyTime::max();
    Hold h = impl().acquire_movable(read_side_, deadline);
    if (!h) throw TimeoutError("read lock '" + keys_.name() + "' not acquired within max_wait");
    return h;
}
Hold RedisReadWriteLock::try_acquire_shared_until_steady(SteadyTime deadline) {
    return impl().acquire_movable(read_side_, deadline);
}

void RedisReadWriteLock::unlock_as(UnlockMode mode) { impl().release(*write_side_, mode == UnlockMode::Throw); }

void RedisReadWriteLock::lock_shared() {
    const SteadyTime deadline =
        options_.max_wait ? SteadyClock::now() + *options_.max_wait : SteadyTime::max();
    if (!try_lock_shared_until_steady(deadline)) {
        throw TimeoutError("read lock '" + keys_.name() + "' not acquired within max_wait");
    }
}

bool RedisReadWriteLock::try_lock_shared() {
    return impl().acquire(read_side_, std::nullopt);
}

void RedisReadWriteLock::unlock_shared_as(UnlockMode mode) {
    impl().release(*read_side_, mode == UnlockMode::Throw);
}

bool RedisReadWriteLock::lost() const {
    return view_hold(impl(), keys_.rw_writer()).lost ||
           view_hold(impl(), keys_.rw_readers()).lost;
}
int RedisReadWriteLock::write_hold_count() const {
    return view_hold(impl(), keys_.rw_writer()).count;
}
int RedisReadWriteLock::read_hold_count() const {
    return view_hold(impl(), keys_.rw_readers()).count;
}

FenceToken RedisReadWriteLock::fence_token() const {
    HoldView v = view_hold(impl(), keys_.rw_writer());
    if (!v.exists) {
        throw NotOwnerError("lock '" + keys_.name() +
                            "': fence_token() by a thread that does not hold the write side");
    }
    return v.token;
}

}  // namespace lockstep
