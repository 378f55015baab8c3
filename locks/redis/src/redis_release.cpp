// The release flow of every Redis lock side: L10 (a thread that does not hold the lock cannot
// release it: NotOwnerError, nothing sent), the count-down of a reentrant hold, a hold found gone
// at unlock (L3, L4: reported once, thrown only to unlock_checked()), and the absorbed second
// unlock of a std guard after a LockLostError.
#include <utility>

#include "lock_client_impl.h"
#include "lockstep/core/error.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/core/logging.h"
#include "lockstep/locks/lock_errors.h"

namespace lockstep {

// What one release call carries through its stages.
struct RedisLockClient::Impl::Release {
    const LockSide& side;
    const bool checked;  // unlock_checked(): a lost hold or a failed release is thrown
    const std::string key_owner;  // the owner key's string: who may release
    const std::string hid;        // hold_id(side.hold_key(), key_owner)
    const bool movable;     // a movable Hold releases once: no absorbed second unlock
    std::shared_ptr<RedisHold> held;
    bool last = false;  // the release ends the hold (count 1), not an inner re-entry
    bool lost_before = false;  // lost (reported, or past its validity) before the release was sent
};

// The flow: find this thread's hold (L10), then either the hold is gone with the closed client,
// or the release script runs and its answer is applied.
void RedisLockClient::Impl::release(const LockSide& side, bool checked, OwnerKey owner_key) {
    const std::string key_owner = owner_of(owner_key);
    Release rel{side, checked, key_owner, hold_id(side.hold_key(), key_owner), owner_key.movable};
    bool client_closed = false;
    if (!find_release_target(rel, client_closed)) return;
    if (client_closed) {
        // close() released this hold and reported it; nothing reaches Redis any more.
        forget(rel);
        stats.unlocks_of_lost_holds.fetch_add(1);
        if (checked) throw lost_error(rel);
        return;
    }
    struct EndUse {
        Impl& impl;
        ~EndUse() {
            MutexLock lock(impl.mutex);
            if (--impl.calls_in_use == 0) impl.calls_done_cv.notify_all();
        }
    } end_use{*this};  // the Use that find_release_target() took

    const bool capped = past_cap(rel);
    fault::point(side.fault_points().before_release);
    // The hold's own owner value (one per acquisition): a release of this hold that arrives late
    // cannot end a later hold of the same thread.
    const std::string& owner = rel.held->owner;
    int answer = 0;
    try {
        // A capped hold ends whatever its count: the watchdog's release may not have run yet.
        answer = side.release(owner, rel.last || capped);
    } catch (const std::exception& e) {
        // Past its validity the hold was lost before this unlock, whatever the release's error
        // says (a partitioned holder whose new connections are refused): reported as a loss,
        // LockLostError for a checked unlock (L10, L11).
        if (lost_before_failed_release(rel, e)) return;
        // The release may or may not have run. Stop renewing a last hold (its lease ends it at
        // the latest); count an inner one down.
        count_down(rel);
        if (checked) throw;
        // The guard path: reported, never thrown (a std guard's destructor would terminate).
        stats.unlock_errors.fetch_add(1);
        logger()->warn("lock '{}': releasing the {} hold of {} failed ({}); its lease ends it", side.name(),
                       side.kind(), owner, e.what());
        return;
    }
    fault::point(side.fault_points().after_release);
    if (answer == 0) return end_lost_hold(rel, LockLossReason::FoundGone, "gone at unlock");
    // The key was still there (the server's lease runs from a later instant than the holder's
    // count), but the holder's validity had ended: lost() said so and on_lost ran or is due. The
    // release frees the key early; the unlock still tells of the loss (L10, L11).
    if (rel.last && rel.lost_before) return end_lost_hold(rel, LockLossReason::Expired, "its validity ended before unlock");
    if (capped) {
        // Given back by this release rather than by the watchdog's: a loss all the same (reported).
        stats.unlocks_of_lost_holds.fetch_add(1);
        forget(rel);
        if (checked) throw lost_error(rel);
        return;
    }
    if (rel.last) {
        lock_log(spdlog::level::debug, side.name(), log_tag(side), "released after holding {} ms",
                 elapsed_ms(rel.held->acquired_at));
    }
    count_down(rel);
}

// L10: never a silent success, and nothing is sent: a thread that does not hold the lock cannot
// release it (NotOwnerError). False: the std guard's unlock after a LockLostError, absorbed.
// Unless the client is closed, takes a Use under the same lock as the check (the caller ends it).
bool RedisLockClient::Impl::find_release_target(Release& rel, bool& client_closed) {
    MutexLock lock(mutex);
    auto it = holds.find(rel.hid);
    if (it == holds.end()) {
        if (absorb_one_unlock.erase(rel.hid) > 0) return false;
        throw NotOwnerError("lock '" + rel.side.name() + "': unlock of a " + rel.side.kind() +
                            " lock this thread does not hold");
    }
    rel.held = it->second;
    rel.last = rel.held->count == 1;
    client_closed = closed;
    if (!closed) ++calls_in_use;
    return true;
}

// L3, L4, L10: the hold is not ours any more (lease ran out, maybe someone else holds it now, or
// the server restarted; or its validity had ended before a release that still found the key).
// Reported (once) either way; thrown only to a checked unlock.
void RedisLockClient::Impl::end_lost_hold(Release& rel, LockLossReason reason, const char* why) {
    std::optional<LockLoss> loss;
    {
        MutexLock lock(mutex);
        loss = mark_lost_locked(*rel.held, reason, why);
    }
    stats.unlocks_of_lost_holds.fetch_add(1);
    forget(rel);
    if (loss) report(rel.held, *loss);
    if (rel.checked) throw lost_error(rel);
}

bool RedisLockClient::Impl::past_cap(Release& rel) {
    std::optional<LockLoss> loss;
    bool capped = false;
    {
        MutexLock lock(mutex);
        const SteadyTime now = SteadyClock::now();
        rel.lost_before = rel.held->lost || now >= rel.held->ends_at();  // under the lock past_cap takes anyway
        if (!rel.held->lost && now >= rel.held->cap) {
            loss = mark_lost_locked(*rel.held, LockLossReason::MaxHoldReached, "max_hold reached before unlock");
        }
        capped = rel.held->lost && rel.held->loss_reason == LockLossReason::MaxHoldReached;
    }
    if (loss) report(rel.held, *loss);
    return capped;
}

bool RedisLockClient::Impl::lost_before_failed_release(Release& rel, const std::exception& failure) {
    std::optional<LockLoss> loss;
    {
        MutexLock lock(mutex);
        if (!rel.held->lost && SteadyClock::now() < rel.held->ends_at()) return false;
        loss = mark_lost_locked(*rel.held, LockLossReason::Unreachable,
                                std::string("its validity ended before unlock; the release failed: ") + failure.what());
    }
    stats.unlocks_of_lost_holds.fetch_add(1);
    forget(rel);
    if (loss) report(rel.held, *loss);
    if (rel.checked) throw lost_error(rel);
    return true;
}

// A last release forgets the hold; an inner one counts it down.
void RedisLockClient::Impl::count_down(Release& rel) {
    if (rel.last) {
        forget(rel);
    } else {
        MutexLock lock(mutex);
        --rel.held->count;
    }
}

// The hold leaves the registry; a renewal under way for it is ignored when it answers (L5). Its
// local gate opens last, after the registry lock is given back: the next local thread finds
// this thread's hold gone (docs/locks.md "The local gate").
void RedisLockClient::Impl::forget(Release& rel) {
    stats.hold_time.record(SteadyClock::now() - rel.held->acquired_at);
    GatePass pass;  // destroyed after `lock`: leaves the gate
    MutexLock lock(mutex);
    rel.held->active = false;
    pass = std::move(rel.held->gate_pass);
    auto it = holds.find(rel.hid);
    if (it != holds.end() && it->second == rel.held) holds.erase(it);
}

// The error of a checked unlock of a lost hold; the std guard's unlock that follows is absorbed.
LockLostError RedisLockClient::Impl::lost_error(Release& rel) {
    LockLossReason reason = LockLossReason::Expired;
    {
        MutexLock lock(mutex);
        if (!rel.movable) absorb_one_unlock.insert(rel.hid);
        reason = rel.held->loss_reason;
    }
    return LockLostError("lock '" + rel.side.name() + "': unlock of a " + rel.side.kind() + " hold that was lost (" +
                         std::string(to_string(reason)) +
                         "); the critical section was not protected to its end");
}

}  // namespace lockstep
