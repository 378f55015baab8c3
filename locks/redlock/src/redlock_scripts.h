// The Lua scripts one Redlock master runs (one place; docs/locks.md "Redlock" argues them).
// KEYS[1] is the lock key, KEYS[2] the master's fencing counter of the name.
#pragma once

#include "lockstep/cache/redis_script.h"

namespace lockstep::redlock_detail {

// ARGV: owner, lease ms → {1, counter after INCR} (this master's vote) or {0, counter}.
const RedisScript& acquire_script();
// ARGV: owner, token → 1 when the caller still holds this master's key (counter raised to at
// least token), else 0.
const RedisScript& commit_script();
// ARGV: owner, lease ms → 1 when the key was the caller's and its lease restarted, else 0.
const RedisScript& renew_script();
// ARGV: owner[, channel] → 1 when the caller's key was deleted (and, with a channel, the owner
// published on it), else 0.
const RedisScript& release_script();

}  // namespace lockstep::redlock_detail
