// Internal (RACES L8, Sentinel and Cluster): a RedisLockClient on a Sentinel-guarded Redis or a
// Redis Cluster listens for a master being replaced. Every hold it has on that master then is
// reported lost (LockLossReason::Failover): the key may never have reached the promoted replica,
// and nothing the client can ask the new master proves otherwise for certain (a key that is there
// now may be a replica's stale copy), so such a hold is never silently kept. Sentinel: every hold;
// Cluster: the holds whose key's slot was on the failed-over shard (RedisMasterChange), not those
// on other shards nor those whose slot was migrated. On a standalone server nothing is registered.
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
