// The per-key distributed locks of one repository (lock_mode.h): KeyLocks holds what every lock
// needs (the LockService, the lock options, where waits and losses are counted); a KeyLock is
// the lock of one key for one operation.
//
// A hold found lost at release (its lease ran out: another reader or writer may have run its
// cache step inside the critical section) is answered with a DEL of the key, so that nothing
// stale it may have caused stays (C2 under Mutex and ReadWrite).
//
// Thread safety: KeyLocks may be used from any thread; a KeyLock by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "cache_health.h"
#include "delete_queue.h"
#include "lockstep/strategies/entity_keys.h"
#include "lockstep/strategies/repository_options.h"
#include "repository_stats.h"

namespace lockstep {
class DistributedMutex;
class DistributedReadWriteLock;
class LockService;
}  // namespace lockstep

namespace lockstep::detail {

class KeyLocks {
public:
    // `options`: lock_mode, lock_service, lock_wait, lock_lease (borrowed: outlives this).
    KeyLocks(std::string repository, const RepositoryOptions& options, const EntityKeys& keys, RepositoryStats& stats,
             CacheHealth& health, DeleteQueue& deletes);

    LockMode mode() const noexcept { return options_.lock_mode; }

private:
    friend class KeyLock;

    const std::string repository_;
    const RepositoryOptions& options_;
    const EntityKeys& keys_;
    RepositoryStats& stats_;
    CacheHealth& health_;
    DeleteQueue& deletes_;
    // Makes the locks (options.lock_service); null under LockMode::None.
    LockService* const service_;
};

// The lock of one key for one operation, per the lock mode. Released explicitly by release();
// the destructor releases too (never throwing) when an exception left the scope.
class KeyLock {
public:
    enum class Side { Shared, Exclusive };
    enum class Outcome { Held, NotNeeded, TimedOut, Unavailable };

    KeyLock(KeyLocks& locks, std::int64_t id, Side side);
    ~KeyLock();
    KeyLock(const KeyLock&) = delete;
    KeyLock& operator=(const KeyLock&) = delete;

    Outcome acquire();
    // Unlocks. A hold found lost is counted, logged, and answered with a DEL of the key.
    void release();

private:
    // try_lock, then (counted as a wait) try_lock_for(lock_wait). Throws ConnectionError.
    bool take(const std::string& name);

    KeyLocks& locks_;
    std::int64_t id_;
    Side side_;
    std::unique_ptr<DistributedMutex> mutex_;
    std::unique_ptr<DistributedReadWriteLock> rw_;
    bool held_ = false;
    Clock::time_point held_since_{};
};

}  // namespace lockstep::detail
