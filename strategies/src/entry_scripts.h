// The Lua scripts of the cache entries (cache_entry.h has the envelope they parse). Each one
// touches one key, KEYS[1] (refill_if_unchanged also its companion of the same hash tag), so
// each is legal on Redis Cluster.
#pragma once

#include "lockstep/cache/redis_script.h"

namespace lockstep::entry_scripts {

// ARGV: marker, marker TTL ms. Returns {1} claimed, {2} busy, {3, entry} present.
const RedisScript& claim();
// ARGV: entry, version (decimal; '' for a not-found entry), TTL ms.
// Returns 1 stored, 0 refused, 2 unchanged.
const RedisScript& fill_if_newer();
// ARGV: marker, entry, TTL ms. Returns 1 stored, 0 refused.
const RedisScript& fill_if_marker();
// ARGV: expected bytes. Returns 1 deleted, 0 not.
const RedisScript& remove_if_equals();
// KEYS: the entry, its refill key (same hash tag). ARGV: expected entry, new entry, TTL ms,
// refill marker. Returns 1 stored, 0 refused.
const RedisScript& refill_if_unchanged();

}  // namespace lockstep::entry_scripts
