// The semaphore's Lua scripts (one place, one comment per branch). Every script touches only the
// keys of one name, which share the hash tag `{<name>}`: legal on Redis Cluster.
#pragma once

#include "lockstep/cache/redis_script.h"

namespace lockstep::detail {

// KEYS: 1 permits zset (id -> expiry, server ms), 2 fence counter. ARGV: 1 N, 2 lease ms, 3 id.
// Returns {1, fencing token} when granted, {0, ms until the earliest permit expires} when full.
const RedisScript& semaphore_acquire_script();
// KEYS: 1 permits zset. ARGV: 1 lease ms, 2.. ids. Returns one 1 (renewed) / 0 (gone) per id.
const RedisScript& semaphore_renew_script();
// KEYS: 1 permits zset. ARGV: 1 id, 2 release channel. Returns 1 released, 0 gone, -1 expired.
const RedisScript& semaphore_release_script();
// KEYS: 1 permits zset. Returns the permits in use (expired ones purged first).
const RedisScript& semaphore_count_script();

}  // namespace lockstep::detail
