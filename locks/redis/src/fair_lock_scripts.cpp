// RedisFairMutex's scripts. Keys of one name (all under the hash tag {<name>}, one slot):
//   <stem>:fair      string: the holder's owner id, TTL = lease
//   <stem>:fair:q    list: waiters in server-side arrival order (FIFO)
//   <stem>:fair:qx   zset: waiter -> expiry (server ms); a waiter refreshes it at every re-check
//   <stem>:fence     the fencing counter, shared with RedisMutex / RedisReadWriteLock of the name
// Waiter channels: <stem>:fair:ch:<waiter id>.
#include "fair_lock_scripts.h"

#include <string>

namespace lockstep::fair_scripts {

namespace {

// Server time (never a client clock, L2) and the helpers every script shares.
constexpr const char* kPrelude = R"lua(
local t = redis.call('time')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- A waiter that stopped re-checking (its process died or hangs) is skipped once its grace
-- has run out: it is popped from the head, so it cannot block the line forever.
local function drop_dead_heads(q, qx)
  while true do
    local head = redis.call('lindex', q, 0)
    if not head then return nil end
    local exp = tonumber(redis.call('zscore', qx, head))
    if exp and exp > now_ms then return head end
    redis.call('lpop', q)
    redis.call('zrem', qx, head)
  end
end

-- L9: tell the next live waiter, and only it. SPUBLISH counts the subscribers that got it: 0
-- means that waiter's process is gone (a waiter subscribes before it joins the line), so it
-- is dropped at once instead of after its grace, and the next one is told.
local function wake_next(q, qx, channel_prefix)
  for _ = 1, 64 do
    local head = drop_dead_heads(q, qx)
    if not head then return end
    if redis.call('spublish', channel_prefix .. head, 'go') > 0 then return end
    redis.call('lpop', q)
    redis.call('zrem', qx, head)
  end
end

-- Same rule as RedisMutex's counter (lock_scripts.cpp): last + 1, never below server µs.
local function next_fence(key, ttl)
  local last = tonumber(redis.call('get', key) or '0') or 0
  local token = now_us
  if last >= token then token = last + 1 end
  redis.call('set', key, string.format('%.0f', token), 'px', ttl)
  return token
end
)lua";

std::string with_prelude(const char* body) { return std::string(kPrelude) + body; }

}  // namespace

// KEYS: 1 lock, 2 queue, 3 queue expiries, 4 fence.
// ARGV: 1 waiter id (the owner id with an attempt number), 2 owner id, 3 lease ms, 4 grace ms,
//       5 queue? (1: join or stay in the line when busy; 0: a try_lock, never queues),
//       6 fence counter TTL ms.
// Returns {1, token} when acquired, {0, ms until the holder's lease ends} when busy.
const RedisScript& acquire() {
    static const RedisScript s(with_prelude(R"lua(
local head = drop_dead_heads(KEYS[2], KEYS[3])
local holder = redis.call('get', KEYS[1])
-- FIFO: a free lock goes to the oldest live waiter; nobody may overtake it (no barging).
if not holder and (not head or head == ARGV[1]) then
  if head == ARGV[1] then
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], ARGV[1])
  end
  redis.call('set', KEYS[1], ARGV[2], 'px', ARGV[3])
  return {1, next_fence(KEYS[4], tonumber(ARGV[6]))}
end
if ARGV[5] == '1' then
  if not redis.call('zscore', KEYS[3], ARGV[1]) then
    redis.call('rpush', KEYS[2], ARGV[1])  -- arrival order is the server's, not the client's
  end
  redis.call('zadd', KEYS[3], now_ms + tonumber(ARGV[4]), ARGV[1])
  local keep = tonumber(ARGV[4]) * 2 + tonumber(ARGV[3])
  redis.call('pexpire', KEYS[2], keep)
  redis.call('pexpire', KEYS[3], keep)
end
local ttl = redis.call('pttl', KEYS[1])
if ttl < 0 then ttl = 0 end
return {0, ttl}
)lua"));
    return s;
}

// KEYS: 1 lock, 2 queue, 3 queue expiries. ARGV: 1 owner id, 2 channel prefix.
// Returns 1 when released (the next live waiter is told), 0 when the lock is not ours (lost, L3).
const RedisScript& release() {
    static const RedisScript s(with_prelude(R"lua(
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('del', KEYS[1])
wake_next(KEYS[2], KEYS[3], ARGV[2])
return 1
)lua"));
    return s;
}

// KEYS: 1 lock. ARGV: 1 owner id, 2 lease ms. 1 renewed, 0 the hold is gone (L5: reported lost).
const RedisScript& renew() {
    static const RedisScript s(R"lua(
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('pexpire', KEYS[1], ARGV[2])
return 1
)lua");
    return s;
}

// A waiter that gives up (timeout, error) leaves the line; if the lock is free, the new head is
// told, so the line does not wait for the leaver's grace.
// KEYS: 1 lock, 2 queue, 3 queue expiries. ARGV: 1 waiter id, 2 channel prefix.
const RedisScript& leave() {
    static const RedisScript s(with_prelude(R"lua(
redis.call('lrem', KEYS[2], 0, ARGV[1])
redis.call('zrem', KEYS[3], ARGV[1])
if redis.call('exists', KEYS[1]) == 0 then wake_next(KEYS[2], KEYS[3], ARGV[2]) end
return 1
)lua"));
    return s;
}

}  // namespace lockstep::fair_scripts
