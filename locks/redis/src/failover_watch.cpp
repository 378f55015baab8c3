#include "failover_watch.h"

#include <utility>
#include <vector>

namespace lockstep {

namespace {

// The listener: runs on the thread that switched the master (the sentinel subscriber's, or a
// caller's that rediscovered), never while this client's registry mutex is held by that thread.
// Sentinel: every hold. Cluster: the holds whose key hashes to a slot whose master was replaced
// (every key of one lock shares its hash tag, so the hold key's slot is the lock's).
void report_failover(RedisLockClient::Impl& impl, const RedisMasterChange& change) {
    std::vector<std::pair<std::shared_ptr<RedisHold>, LockLoss>> losses;
    {
        MutexLock lock(impl.mutex);
        // Under the registry mutex: a new hold checks this under the same mutex right after it was
        // registered, so it is either marked below or sees the change there. On a cluster any
        // shard's change counts: a new hold on another shard is acquired once more, never lost.
        impl.last_master_change.store(SteadyClock::now().time_since_epoch().count());
        if (impl.closed) return;
        for (const auto& [k, h] : impl.holds) {
            if (!h->active || !change.covers_key(h->side->hold_key())) continue;
            if (auto loss = impl.mark_lost_locked(
                    *h, LockLossReason::Failover,
                    "the Redis master changed while the lock was held; the promoted replica may not have the key")) {
                losses.emplace_back(h, *loss);
            }
        }
    }
    for (const auto& [h, loss] : losses) impl.report(h, loss);
}

}  // namespace

void watch_master_changes(RedisLockClient::Impl& impl) {
    std::weak_ptr<RedisLockClient::Impl> self = impl.weak_from_this();
    impl.master_change_listener = impl.redis.add_master_change_listener([self](const RedisMasterChange& change) {
        if (auto s = self.lock()) report_failover(*s, change);
    });
}

void unwatch_master_changes(RedisLockClient::Impl& impl) {
    impl.redis.remove_master_change_listener(impl.master_change_listener);
}

bool master_changed_since(const RedisLockClient::Impl& impl, SteadyTime sent) {
    // No lock needed (the acquire path stays one atomic load): the listener stores the time under
    // the registry mutex before it marks holds, and the new hold was inserted under that mutex.
    // Either the listener ran first (this load sees its store) or after (it marked the hold).
    return SteadyTime(SteadyClock::duration(impl.last_master_change.load())) >= sent;
}

}  // namespace lockstep
