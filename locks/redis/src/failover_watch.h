// Internal (RACES L8, Sentinel): a RedisLockClient on a Sentinel-guarded Redis listens for the
// master changing. Every hold it has then is reported lost (LockLossReason::Failover): the key
// may never have reached the promoted replica, and nothing the client can ask the new master
// proves otherwise for certain (a key that is there now may be a replica's stale copy), so such
// a hold is never silently kept. On the other topologies nothing is registered.
#pragma once

#include "lock_client_impl.h"

namespace lockstep {

// Called by the RedisLockClient's constructor and destructor.
void watch_master_changes(RedisLockClient::Impl& impl);
void unwatch_master_changes(RedisLockClient::Impl& impl);

// Whether the client learnt of a master change at or after `sent` (when a new acquisition was
// sent): the acquisition may have run on the old master.
bool master_changed_since(const RedisLockClient::Impl& impl, SteadyTime sent);

}  // namespace lockstep
