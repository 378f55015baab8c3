// LockOptions: what a caller chooses per lock, whatever the backend.
//
// Thread safety: a plain struct.
#pragma once

#include <chrono>
#include <functional>
#include <optional>

#include "lockstep/locks/lock_loss.h"

namespace lockstep {

struct LockOptions {
    // How long a holder that stops (paused, partitioned, SIGSTOPped) keeps everybody else out
    // before the backend gives its lock away, and so how soon a dead holder's lock is free:
    //   Redis      the key's lease, renewed every lease/3 by the client's watchdog;
    //   MySQL      the pinned session's wait_timeout (whole seconds, rounded up), kept alive by
    //              the service's watchdog every lease/3; a SIGKILLed holder frees it at once;
    //   ZooKeeper  ignored: the service's session timeout governs (ZooKeeperLockOptions);
    //   memory     ignored: holds end only by unlock or InMemoryLockService::expire().
    std::chrono::milliseconds lease{30000};
    // Redis only: false = a fixed lease that is not renewed (a longer hold is lost).
    bool renew = true;
    // lock() / lock_shared() give up with TimeoutError after waiting this long; unset: they wait
    // indefinitely.
    std::optional<std::chrono::milliseconds> max_wait;
    // Called once when a hold of this lock is lost (after the service's own callback), on the
    // thread that notices (usually a watchdog or session thread). Keep it quick; it must not lock
    // or unlock locks of the same service.
    std::function<void(const LockLoss&)> on_lost;
    // A cap on every hold of this lock, renewed or not (ShedLock's lock-at-most-for): this long
    // after its acquisition a hold still held is ended (given back to the server), reported lost
    // with LockLossReason::MaxHoldReached (on_lost, lost(), a Hold's stop token), and its
    // owner's release then reports the loss (LockLostError from the checked variants). Unset:
    // no cap. docs/holds.md.
    std::optional<std::chrono::milliseconds> max_hold;
};

}  // namespace lockstep
