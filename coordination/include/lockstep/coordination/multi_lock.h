// MultiLock: all or nothing over several names of one LockService (Curator's
// InterProcessMultiLock, with a fixed order). The names are sorted and de-duplicated once, at
// construction, and always acquired in that order, so two MultiLocks over {a, b} and {b, a} can
// never wait for each other (no deadlock by lock order). Each name is waited for with what is
// left of the one deadline of the call; when any name cannot be had, the names already taken are
// released in reverse order before the call returns false (or throws): the caller holds nothing.
//
//   lockstep::MultiLock both(service, {"account:7", "account:3"});
//   {
//       std::scoped_lock hold(both);                       // TimedLockable
//       transfer(tx, both.fence_token("account:3"), both.fence_token("account:7"));
//   }
//
// Every name keeps its own hold, with its own fencing token (fence_token(name): pass it to the
// fence check of the row that name guards) and its own loss: lost() is true when any of them is
// lost, and LockOptions::on_lost runs once per lost name.
//
// Movable holds (multi_hold.h, docs/holds.md): acquire() / try_acquire*() take every name for an
// owner of its own, all or nothing in the same fixed order, and return them as one MultiHold that
// any thread may release. Not reentrant: while a MultiHold is held, any other acquisition of one
// of its names (another MultiHold, the thread that made it, any thread's lock()) waits.
//
// Thread safety: like DistributedMutex, one object may be shared by many threads and each
// thread's hold is its own (a thread that locked must be the one to unlock). Reentrant per thread
// as the backend's mutexes are. REQUIRES: the service outlives the MultiLock.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/coordination/multi_hold.h"
#include "lockstep/locks/distributed_mutex.h"
#include "lockstep/locks/lock_options.h"
#include "lockstep/locks/lock_service.h"
#include "lockstep/locks/steady_deadline.h"

namespace lockstep {

class MultiLock {
public:
    // REQUIRES: `names` is not empty (ConfigError) and each follows the name rule (ConfigError).
    // `options` apply to every name; its max_wait bounds the whole of lock(), not each name.
    MultiLock(LockService& service, std::vector<std::string> names, LockOptions options = {});
    ~MultiLock();
    MultiLock(const MultiLock&) = delete;
    MultiLock& operator=(const MultiLock&) = delete;

    // Blocks until every name is held; TimeoutError after LockOptions::max_wait (holding nothing).
    void lock();
    // One attempt per name, no waiting.
    bool try_lock();
    template <class Rep, class Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
        return try_lock_until_steady(detail::deadline_from_now(timeout));
    }
    template <class Clock, class Duration>
    bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
        return try_lock_until_steady(detail::deadline_from_now(deadline - Clock::now()));
    }
    bool try_lock_until_steady(std::chrono::steady_clock::time_point deadline);

    // Every name as one movable value, all or nothing, in names() order: waits up to
    // LockOptions::max_wait for all of them (then TimeoutError, holding nothing).
    MultiHold acquire();
    // One attempt per name, no waiting; an empty MultiHold (holding nothing) when one is busy.
    MultiHold try_acquire();
    template <class Rep, class Period>
    MultiHold try_acquire_for(const std::chrono::duration<Rep, Period>& timeout) {
        return try_acquire_until_steady(detail::deadline_from_now(timeout));
    }
    template <class Clock, class Duration>
    MultiHold try_acquire_until(const std::chrono::time_point<Clock, Duration>& deadline) {
        return try_acquire_until_steady(detail::deadline_from_now(deadline - Clock::now()));
    }
    // Every name waited for with what is left of `deadline`; an empty MultiHold when it passed.
    MultiHold try_acquire_until_steady(std::chrono::steady_clock::time_point deadline);

    // Releases every name, in reverse order. REQUIRES: the calling thread holds them
    // (NotOwnerError otherwise, and nothing changes). A lost name is reported (lost(), on_lost,
    // a log line), never thrown: safe in a std guard.
    void unlock();
    // The same, then LockLostError naming every lost name (all are released either way).
    void unlock_checked();

    // Any name of the calling thread's hold is known lost. No round trip.
    bool lost() const;
    // The names, sorted and de-duplicated: the acquisition order.
    const std::vector<std::string>& names() const noexcept { return names_; }
    // The fencing token of `name` in the calling thread's hold. REQUIRES: `name` is one of
    // names() (ConfigError) and held (NotOwnerError).
    FenceToken fence_token(const std::string& name) const;
    // The calling thread holds every name.
    bool held_by_this_thread() const;

private:
    // Releases the first `count` names in reverse order; never throws.
    void release_first(std::size_t count) noexcept;
    // Releases `holds` (the first names' parts) in reverse order and empties it; never throws.
    void release_holds(std::vector<Hold>& holds) noexcept;

    std::vector<std::string> names_;
    std::vector<std::unique_ptr<DistributedMutex>> mutexes_;  // in names_ order
    LockOptions options_;
};

}  // namespace lockstep
