// The Redis lock client's hold registry: who this thread is (its owner id), the lookup of its
// holds, the view lost() / hold_count() / fence_token() read, and loss reporting (once per hold,
// then the client's and the lock's on_lost callbacks). It is the one registry of every Redis
// lock: the mutex, the read-write lock's sides and the fair mutex (fair_mutex_side.cpp) all keep
// their holds here as RedisHold, renewed by the one watchdog (redis_watchdog.cpp).
//
// Why not locks_detail::HoldTable (hold_table.h), which the other backends share: the Redis
// registry differs in ways the acquire, release and watchdog flows rely on, so moving it onto
// HoldTable would change behaviour, not only structure:
//  - Re-entry goes to Redis (HoldTable's never reaches the backend): it refreshes the lease and
//    finds a hold lost server-side (L6); the count is raised only after Redis answered.
//  - A hold is keyed by (hold key, owner string), where the hold key names the side (mutex, rw
//    read, rw write) of one lock object's keys, not (name, kind, thread number); two lock
//    objects of one name and side share the hold, as they share it in Redis.
//  - Every hold field is guarded by Impl::mutex (HoldTable: `lost` atomic, `count` touched by
//    the owning thread only), because the watchdog reads and writes holds of every thread:
//    valid_until, next_check, `active` (a renewal result for an unlocked hold is ignored, L5).
//  - lost() is also true once the lease has run out by the client's clock without a renewal
//    (view_hold below); HoldTable's lost is only what was reported.
//  - Release removes the hold after the script answered (a failed inner release counts down, a
//    failed last one stops renewing); HoldTable erases it before calling the backend.
//  - Destruction (close()) releases and reports every live hold in one pipeline and refuses new
//    calls (Impl::Use); HoldTable has no closing state.
//  - Counters (LockClientStats) and the hold-time / acquire-latency histograms are kept here.
// What is shared with every other backend: the owner numbers (locks_detail::OwnerKey: a thread's,
// or a movable Hold's, redis_movable_hold.cpp), the validity rule (hold_validity.h), the timer
// threads of the watchdog and of the expiry pass (hold_timer.h), and how a loss is told
// (loss_report.h: the log line, the stop token, the callbacks) with its vocabulary (lock_loss.h).
#include <utility>

#include "hold_table.h"  // locks_detail::this_thread_number
#include "lock_client_impl.h"
#include "loss_report.h"
#include "lockstep/core/logging.h"

namespace lockstep {

std::string hold_id(const std::string& key, const std::string& owner) {
    return key + '\n' + owner;
}

HoldView view_hold(const RedisLockClient::Impl& impl, const std::string& key) {
    auto h = impl.find_hold(key, impl.owner_of_this_thread());
    HoldView v;
    if (!h) return v;
    MutexLock lock(impl.mutex);
    v.exists = true;
    v.count = h->count;
    v.token = h->token;
    // Renewed holds too: while the watchdog is stalled or its renewal stuck (a paused process, a
    // slow or unreachable server), the lease runs out on the server all the same and another
    // client may hold the lock. A late renewal that finds the hold still there moves
    // valid_until on again (the hold never lapsed: nobody re-creates a registered hold).
    v.lost = h->lost || SteadyClock::now() >= h->ends_at();
    return v;
}

std::string RedisLockClient::Impl::owner_of_this_thread() const { return owner_of(OwnerKey::this_thread()); }

std::string RedisLockClient::Impl::owner_of(OwnerKey owner) const { return id + ":" + std::to_string(owner.number); }

std::shared_ptr<RedisHold> RedisLockClient::Impl::find_hold(const std::string& key,
                                                       const std::string& owner) const {
    MutexLock lock(mutex);
    auto it = holds.find(hold_id(key, owner));
    return it == holds.end() ? nullptr : it->second;
}

std::optional<LockLoss> RedisLockClient::Impl::mark_lost_locked(RedisHold& hold, LockLossReason reason,
                                                                std::string message) {
    if (hold.lost) return std::nullopt;
    hold.lost = true;
    hold.loss_reason = reason;
    stats.losses.fetch_add(1);
    return LockLoss{hold.side->name(), hold.side->hold_key(), hold.owner, reason, std::move(message)};
}

void RedisLockClient::Impl::report(const std::shared_ptr<RedisHold>& hold, const LockLoss& loss) {
    locks_detail::report_loss(loss, hold->stop, options.on_lost, hold->side->settings().on_lost);
}

}  // namespace lockstep
