// Internal: what the lock backends share: thread numbers, the hold registry with its expiry
// thread, loss reporting, and the acquire / release flow with its typed errors (L6, L10).
// Redlock, MySQL, ZooKeeper and the in-memory backend keep their holds here; the Redis lock
// client (locks/redis: its mutex, read-write lock and fair mutex alike) keeps its own registry
// (redis_hold_registry.cpp) but the same validity rule (hold_validity.h, RACES L11), the same
// timer (hold_timer.h) and the same loss report (loss_report.h).
//
// A backend supplies a HoldBackend: one new acquisition until a deadline, one release, and the
// abandoning of a lost hold. Everything a caller can observe about reentrancy, NotOwnerError,
// LockLostError, lost() and the on_lost callbacks is decided here, once, so every backend
// behaves alike (tests/lock_conformance).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "hold_timer.h"
#include "hold_validity.h"
#include "lockstep/core/mutex.h"
#include "lockstep/core/thread_annotations.h"
#include "lockstep/locks/lock_loss.h"
#include "lockstep/locks/lock_options.h"

namespace lockstep::locks_detail {

// A number for the calling thread, never reused within the process (pthread ids are: a new
// thread must not "re-enter" a dead thread's hold).
std::uint64_t this_thread_number();

// Who a hold belongs to: the calling thread, or a movable Hold (lockstep/locks/hold.h) whose
// number is drawn from the same sequence as the threads', so it is never a thread's nor another
// Hold's. Every backend identifies a hold's owner on the server by this number (Hold::thread,
// Hold::owner), so a movable hold is another owner to it, whichever thread acts for it.
struct OwnerKey {
    std::uint64_t number = 0;
    bool movable = false;
    static OwnerKey this_thread() { return {this_thread_number(), false}; }
    static OwnerKey new_movable();
};

enum class HoldKind { Mutex = 0, Write = 1, Read = 2 };

// One owner's hold (a thread's or a movable Hold's, OwnerKey) of one lock (name + kind) of one
// service.
struct Hold {
    std::string name;
    HoldKind kind = HoldKind::Mutex;
    std::uint64_t thread = 0;  // the owner's number (OwnerKey): a thread's or a movable Hold's
    bool movable = false;      // owned by a movable Hold, not a thread
    std::string owner;     // "<service id>:<owner number>"
    std::string key;       // the backend's name of the hold (node path, lock name)
    int count = 0;         // reentrant count; touched by the owning thread only
    FenceToken token = 0;  // 0 for read holds
    std::atomic<bool> lost{false};
    std::chrono::milliseconds lease{0};            // the lock's LockOptions::lease
    bool renew = true;                             // the lock's LockOptions::renew
    std::function<void(const LockLoss&)> on_lost;  // the lock's callback
    std::shared_ptr<void> state;                   // the backend's (pinned session, node path)
    // The hold's validity on this process's steady clock (valid_until_from): lost() is true from
    // then on, and the table's expiry thread reports the loss then unless a backend extended it
    // first (HoldTable::extend). SteadyTime::max(): bounded by the backend's own evidence only
    // (the in-memory backend). Set by the backend's acquire before the hold is registered.
    std::atomic<SteadyTime> valid_until{SteadyTime::max()};
    // LockOptions::max_hold: the hold ends (MaxHoldReached) at this instant; max: no cap.
    SteadyTime cap = SteadyTime::max();
    // Requested when the hold is reported lost (report_lost), for a movable Hold's stop_token().
    // No stop state for a thread's hold (nothing reads it).
    std::stop_source stop{std::nostopstate};
    std::atomic<LockLossReason> loss_reason{LockLossReason::Expired};  // set by report_lost
    // When the hold ends unless a renewal extends its validity first.
    SteadyTime ends_at() const { return std::min(valid_until.load(), cap); }
    bool lost_or_expired() const { return lost.load() || SteadyClock::now() >= ends_at(); }
    SteadyTime acquired_at{};                      // for the log line of its release
};

class HoldBackend {
public:
    virtual ~HoldBackend() = default;
    // Takes the lock for a new hold of `hold` (name, kind, owner set), waiting until `deadline`
    // at most (deadline <= now: one attempt). On success sets hold.token, hold.key, hold.state.
    virtual bool acquire(Hold& hold, SteadyTime deadline) = 0;
    // Ends a hold. False when the backend found it gone already (the hold was lost).
    virtual bool release(Hold& hold) = 0;
    // Drops whatever a lost hold still has (best effort). Never throws.
    virtual void abandon(Hold& hold) noexcept = 0;
    // A new hold (not a re-entry) was registered, where the backend's watchdog finds it: called
    // in the acquiring thread right after, never before (a watchdog pass that ran before the
    // registration would not have seen it). Redlock tells its watchdog when the hold is first
    // due. Never throws.
    virtual void registered(const Hold& /*hold*/) noexcept {}
    // The backend's name in log lines ("mysql", "zookeeper", ...).
    virtual std::string_view backend_name() const noexcept = 0;
};

// Owns the holds of one service. Besides the acquire and release flows it runs one expiry
// thread (started with the first hold that has a bounded validity): it sleeps until the earliest
// valid_until among the holds and reports each hold whose validity ran out unextended, so
// on_lost fires on time even while the backend's renewal hangs on a silent network.
class HoldTable {
public:
    // `backend` (the service's own, which owns this table) gives back the holds that reach their
    // max_hold.
    HoldTable(std::string service_id, std::function<void(const LockLoss&)> service_on_lost, HoldBackend& backend);
    ~HoldTable();
    HoldTable(const HoldTable&) = delete;
    HoldTable& operator=(const HoldTable&) = delete;

    const std::string& service_id() const noexcept { return id_; }

    // The acquire flow: re-entry (count + 1; LockLostError if the hold is known lost), or a new
    // acquisition through `backend`, registered on success. False when `deadline` passed.
    // `owner`: the calling thread, or a movable Hold (never re-entered: its number is new).
    bool lock(HoldBackend& backend, const std::string& name, HoldKind kind, SteadyTime deadline,
              const LockOptions& options, OwnerKey owner = OwnerKey::this_thread()) EXCLUDES(mu_);
    // The release flow: NotOwnerError without a hold (unless the last unlock of this lock by this
    // thread threw LockLostError: then a no-op, for std guards; never for a movable owner, which
    // releases once). A lost hold or a failed release:
    // with UnlockMode::Report logged and returned (the loss was reported to on_lost already),
    // with UnlockMode::Throw LockLostError or the backend's error.
    void unlock(HoldBackend& backend, const std::string& name, HoldKind kind, UnlockMode mode,
                OwnerKey owner = OwnerKey::this_thread()) EXCLUDES(mu_);

    // `owner`'s hold (by default the calling thread's).
    std::shared_ptr<Hold> find(const std::string& name, HoldKind kind, OwnerKey owner = OwnerKey::this_thread()) const
        EXCLUDES(mu_);
    int count(const std::string& name, HoldKind kind) const;
    bool lost(const std::string& name, HoldKind kind) const;
    // REQUIRES: held (NotOwnerError otherwise).
    FenceToken token(const std::string& name, HoldKind kind) const;
    // The reason a hold found past its end (ends_at) without a report is lost.
    static LockLossReason end_reason(const Hold& hold, SteadyTime now);

    // Every hold registered now (any thread), e.g. for a watchdog or a session-expiry handler.
    std::vector<std::shared_ptr<Hold>> all() const EXCLUDES(mu_);
    // Marks `hold` lost and runs the service's and the lock's callbacks, once per hold. Safe from
    // any thread; callbacks run without the table's mutex held.
    void report_lost(const std::shared_ptr<Hold>& hold, LockLossReason reason, const std::string& message)
        EXCLUDES(mu_);
    std::uint64_t losses() const noexcept { return losses_.load(); }
    // A renewal acknowledged by the server: the hold is valid until valid_until_from(sent, lease)
    // (never moved earlier by a late acknowledgement of an older renewal). No effect on a hold
    // already reported lost.
    static void extend(Hold& hold, SteadyTime sent);
    // A backend moved a hold's valid_until earlier by itself (a disconnection): the expiry thread
    // wakes for it in time.
    void watch_validity(SteadyTime valid_until) { expiry_.hold_added(valid_until); }
    // Stops the expiry thread (idempotent); a backend whose holds' callbacks use its own state
    // calls it first in its destructor.
    void stop_expiry();

    // The service is being destroyed (its destructor calls this first, then wakes its own
    // waiters). From now on lock() throws LockClientClosedError at once, and so does a lock()
    // whose backend acquisition was under way: its wait ends with that error (the backend's wait
    // loop calls throw_if_closed() when woken) and a hold it got anyway is given back, never
    // registered. Every hold still registered is reported lost (ClientClosed) and abandoned
    // through `backend` (its server side given back); its owner's unlock() then logs and returns,
    // unlock_checked() throws LockLostError. Stops the expiry thread. Idempotent.
    void close(HoldBackend& backend) EXCLUDES(mu_);
    bool closed() const noexcept { return closed_.load(); }
    // LockClientClosedError once closed(): for a backend's wait loops, after every wake-up.
    void throw_if_closed() const;

private:
    using Key = std::tuple<std::string, int, std::uint64_t>;
    static Key key_of(const std::string& name, HoldKind kind, OwnerKey owner);
    std::string id_;
    std::function<void(const LockLoss&)> service_on_lost_;
    HoldBackend& backend_;
    mutable Mutex mu_;
    std::map<Key, std::shared_ptr<Hold>> holds_ GUARDED_BY(mu_);
    std::set<Key> unlocked_after_loss_ GUARDED_BY(mu_);  // the next unlock of these is a no-op (std guards)
    std::atomic<std::uint64_t> losses_{0};
    std::atomic<bool> closed_{false};  // written under mu_, so a registration under mu_ sees it

    [[noreturn]] void throw_closed() const;
    SteadyTime expiry_pass() EXCLUDES(mu_);
    // Started with the first hold that has a bounded validity (hold_timer.h); declared last, so
    // it stops (and its pass is over) before the holds it looks at go.
    HoldTimer expiry_{HoldTimer::kNoMaxSleep};
};

// 32 random lowercase hex digits.
std::string random_hex_id();

}  // namespace lockstep::locks_detail
