// Every Lua script of locks/, in one place (lock_scripts.cpp). Each script touches only keys of
// one lock name (one hash tag), passed in KEYS, so all are legal on Redis Cluster.
// Return conventions are documented next to each script.
#pragma once

#include "lockstep/cache/redis_script.h"

namespace lockstep::lock_scripts {

// Mutex (keys: LockKeys::mutex, fence, mutex_queue, mutex_queue_expiry).
const RedisScript& mutex_acquire();
const RedisScript& mutex_release();
const RedisScript& mutex_leave_queue();
// Renews one hash-with-owner-field hold: the mutex and the rw writer.
const RedisScript& hash_hold_renew();

// Read-write lock.
const RedisScript& rw_read_acquire();
const RedisScript& rw_read_release();
const RedisScript& rw_read_renew();
const RedisScript& rw_write_acquire();
const RedisScript& rw_write_release();
const RedisScript& rw_leave();

// The fencing-token rule as a Lua function `next_fence(key, ttl, clock_us)`, for the scripts of
// other Redis lock kinds that share a name's counter (the fair mutex): one rule, one text.
const char* next_fence_lua();
// The Lua text that defines `now_us`, `now_ms` and `clock()` (reads TIME once, on first use;
// returns now_us): RedisMutex's lazy server clock, shared with the fair mutex's scripts.
const char* lazy_clock_lua();

}  // namespace lockstep::lock_scripts
