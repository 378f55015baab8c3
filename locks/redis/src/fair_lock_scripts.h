// The Lua scripts of RedisFairMutex, in one place (fair_lock_scripts.cpp).
#pragma once

#include "lockstep/cache/redis_script.h"

namespace lockstep::fair_scripts {

const RedisScript& acquire();
const RedisScript& release();
const RedisScript& renew();
const RedisScript& leave();

}  // namespace lockstep::fair_scripts
