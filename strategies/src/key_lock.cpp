// KeyLocks and KeyLock: taking, timing and releasing the lock of one key.
#include "key_lock.h"

#include "lockstep/core/logging.h"
#include "lockstep/locks/lock_service.h"

namespace lockstep::detail {

KeyLocks::KeyLocks(std::string repository, const RepositoryOptions& options, const EntityKeys& keys,
                   RepositoryStats& stats, CacheHealth& health, DeleteQueue& deletes)
    : repository_(std::move(repository)),
      options_(options),
      keys_(keys),
      stats_(stats),
      health_(health),
      deletes_(deletes),
      service_(options.lock_service) {}

KeyLock::KeyLock(KeyLocks& locks, std::int64_t id, Side side) : locks_(locks), id_(id), side_(side) {}

KeyLock::~KeyLock() {
    if (!held_) return;
    try {
        release();
    } catch (const std::exception& e) {
        logger()->error("repository '{}': releasing the lock of {} failed: {}", locks_.repository_,
                        locks_.keys_.lock_name(id_), e.what());
    }
}

bool KeyLock::take(const std::string& name) {
    const auto& o = locks_.options_;
    LockOptions lo;
    lo.lease = o.lock_lease;
    if (o.lock_mode == LockMode::Mutex) {
        mutex_ = locks_.service_->make_mutex(name, lo);
        if (mutex_->try_lock()) return true;
        bump(locks_.stats_.c.lock_waits);
        return mutex_->try_lock_for(o.lock_wait);
    }
    rw_ = locks_.service_->make_read_write_lock(name, lo);
    const bool shared = side_ == Side::Shared;
    if (shared ? rw_->try_lock_shared() : rw_->try_lock()) return true;
    bump(locks_.stats_.c.lock_waits);
    return shared ? rw_->try_lock_shared_for(o.lock_wait) : rw_->try_lock_for(o.lock_wait);
}

KeyLock::Outcome KeyLock::acquire() {
    if (locks_.mode() == LockMode::None) return Outcome::NotNeeded;
    const std::string name = locks_.keys_.lock_name(id_);
    ScopedLatency waited(&locks_.stats_.lat.lock_wait);
    try {
        if (!take(name)) {
            bump(locks_.stats_.c.lock_timeouts);
            return Outcome::TimedOut;
        }
        held_ = true;
        held_since_ = Clock::now();
        return Outcome::Held;
    } catch (const ConnectionError& e) {
        locks_.health_.failed(e, "lock of " + name);
        return Outcome::Unavailable;
    }
}

void KeyLock::release() {
    if (!held_) return;
    held_ = false;
    locks_.stats_.lat.lock_hold.record(Clock::now() - held_since_);
    const std::string name = locks_.keys_.lock_name(id_);
    try {
        if (mutex_) {
            mutex_->unlock_checked();
        } else if (side_ == Side::Shared) {
            rw_->unlock_shared_checked();
        } else {
            rw_->unlock_checked();
        }
    } catch (const LockLostError& e) {
        // The lease ran out under us: another reader or writer may have run its cache step
        // inside our critical section. Delete the key so nothing stale we may have caused stays.
        bump(locks_.stats_.c.locks_lost);
        const std::string key = locks_.keys_.value(id_);
        logger()->warn("repository '{}': lock {} was lost before unlock ({}); deleting {} to be safe",
                       locks_.repository_, name, e.what(), key);
        locks_.deletes_.delete_key(key);
    } catch (const ConnectionError& e) {
        // The hold ends with its lease; count and log.
        locks_.health_.failed(e, "unlock of " + name);
    }
}

}  // namespace lockstep::detail
