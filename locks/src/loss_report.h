// Internal: how every backend tells that a hold was lost, once the backend has marked it lost
// (once per hold: the hold table's and the Redis client's registries each decide that under
// their own lock). The hold's stop token requested (a movable Hold's stop_token(), before any
// callback runs, so work that polls it stops as early as possible), the service's and the lock's
// on_lost callbacks, then a warning in the log. Each callback is guarded: one that throws is logged,
// never propagated, because the reporting thread is a watchdog, an expiry pass or a holder's
// unlock, none of which may fail for it.
//
// Thread safety: safe from any thread; call it with no lock held (a callback may call back into
// the lock service).
#pragma once

#include <functional>
#include <stop_token>

#include "lockstep/locks/lock_loss.h"

namespace lockstep::locks_detail {

void report_loss(const LockLoss& loss, std::stop_source& stop,
                 const std::function<void(const LockLoss&)>& service_on_lost,
                 const std::function<void(const LockLoss&)>& lock_on_lost) noexcept;

}  // namespace lockstep::locks_detail
