// Internal: the fair mutex (RedisFairLockService::make_mutex) as a side of the one Redis lock
// client (fair_mutex_side.cpp). Its keys, scripts (fair_lock_scripts.cpp) and wake rule are the
// variant; the hold, its registry, the watchdog, the wait rooms, the acquire and release flows are
// the client's.
#pragma once

#include <memory>

#include "lock_client_impl.h"
#include "lockstep/locks/lock_keys.h"
#include "lockstep/locks/redis_fair_lock_service.h"

namespace lockstep {

std::shared_ptr<const LockSide> make_fair_mutex_side(RedisLockClient::Impl& impl, const LockKeys& keys,
                                                     HoldSettings settings, const RedisFairLockOptions& fair);

}  // namespace lockstep
