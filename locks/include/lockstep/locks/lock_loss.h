// The vocabulary every lock backend shares: fencing tokens and lost holds.
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lockstep {

// A fencing token: strictly greater for every new acquisition of a lock name than any token
// handed out for that name before, on the same backend (see docs/locks.md for what each
// backend's monotonicity rests on). Re-entering a hold returns the token of the hold.
using FenceToken = std::int64_t;

enum class LockLossReason {
    // The backend found the hold gone: a Redis lease ran out (e.g. the process was paused) or
    // the key was deleted; a MySQL session that held the lock ended; a ZooKeeper session expired.
    Expired,
    // The hold's validity ended (valid_until: the send time of the acquisition or of the last
    // renewal the server acknowledged, plus the lease, minus the drift margin) with no renewal
    // acknowledged since: the backend could not be reached, or answered too late, or the holder
    // was paused, for a whole lease. The server may give the lock away from then on, so the hold
    // is presumed gone whatever the network does later (RACES L11).
    Unreachable,
    // A fixed lease (renew == false) ran out before unlock.
    LeaseEnded,
    // Found gone by unlock or by a reentrant lock of the same thread.
    FoundGone,
    // The lock client was destroyed while the hold was held: it released the hold.
    ClientClosed,
    // The Redis master changed (a Sentinel failover) while the hold was held, or while it was
    // being acquired: the promoted replica may never have received the key (RACES L8), so the
    // hold cannot be known safe, even if the key did make it across.
    Failover,
    // The hold reached LockOptions::max_hold: it was ended (given back to the server) and its
    // stop token requested, whether or not its owner was done (ShedLock's lock-at-most-for).
    MaxHoldReached,
};

std::string_view to_string(LockLossReason r) noexcept;

// How an unlock treats a hold that was lost (or whose release failed). `Report` is what
// `unlock()` does, so that a std guard's destructor never throws (a throw there would call
// std::terminate in every instance of a service at once): the loss is reported through lost(),
// the on_lost callbacks and a log line, and the unlock returns. `Throw` is `unlock_checked()`:
// LockLostError for a lost hold, the backend's error for a failed release.
enum class UnlockMode { Report, Throw };

// One lost hold, as given to the `on_lost` callbacks.
struct LockLoss {
    std::string name;   // lock name as given to the lock
    std::string key;    // the backend's name of the hold: Redis key, ZooKeeper node, MySQL lock name
    std::string owner;  // the backend's owner id of the hold (Redis: "<client id>:<owner number>:<hold
                        // number>"; the owner number is a thread's, or a movable Hold's, hold.h)
    LockLossReason reason = LockLossReason::Expired;
    std::string message;  // human-readable detail
};

}  // namespace lockstep
