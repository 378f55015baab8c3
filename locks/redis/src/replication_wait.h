// Internal (RACES L8): what a new acquisition must show before the caller gets it, checked right
// after the hold was registered (docs/locks.md "WAIT after acquire"):
//   - Sentinel: no master change was learnt since the acquisition was sent (failover_watch.h);
//     otherwise the hold is dropped and the acquisition is tried again, on the new master;
//   - LockClientOptions::replication_wait: at least `replicas` replicas acknowledged it within
//     `timeout` (WAIT); otherwise the hold is released and ReplicationWaitError is thrown.
#pragma once

#include <string>

#include "lock_client_impl.h"

namespace lockstep {

// ConfigError for a replication_wait that cannot work (negative replicas, a timeout that is not
// positive or not shorter than the socket timeout, which would break the connection instead).
void check_replication_wait(const RedisLockClient::Impl& impl);

// true: keep the hold. false: the hold was dropped (released, forgotten, not reported); try the
// acquisition again. Throws ReplicationWaitError (hold released) when too few replicas acked.
// REQUIRES: the new hold of `side` (owner value `owner`, registry id `hid`) was just registered.
bool confirm_new_hold(RedisLockClient::Impl& impl, const LockSide& side, const std::string& owner, const std::string& hid,
                      SteadyTime sent);

}  // namespace lockstep
