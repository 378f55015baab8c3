// RedisFairMutex's scripts. Keys of one name (all under the hash tag {<name>}, one slot):
//   <stem>:fair      string: the holder's waiter id, or "<waiter id>#<token>" when a release
//                    granted it the lock; TTL = its lease
//   <stem>:fair:q    list: waiter ids in server-side arrival order (FIFO)
//   <stem>:fair:qx   zset: waiter id -> expiry (server ms); a waiter refreshes it at every re-check
//   <stem>:fence     the fencing counter, shared with RedisMutex / RedisReadWriteLock of the name
// Waiter channels: <stem>:fair:ch:<client id>, one per (lock client, name), sharded (SPUBLISH).
//
// A waiter id is the new hold's owner value, "<client id>:<owner number>:<hold number>:<lease ms>"
// (fair_mutex_side.cpp): the release script reads from it where to publish the grant (the client
// id) and for how long the granted hold lasts (the lease), so the line needs no per-waiter hash
// (one list entry and one zset entry per waiter). The scripts' comments say "service" for the
// lock client that a RedisFairLockService owns.
//
// Grant on release: a release (or a leaver that finds the lock free or granted to it) does not
// free the lock while the line has a live waiter; it makes that waiter the holder (the
// lock key becomes "<waiter id>#<token>" with the waiter's lease, the token drawn from the
// shared counter) and SPUBLISHes "<waiter id> <token>" on the waiter's service channel. The woken
// waiter runs no script: the message is its acquisition.
#include "fair_lock_scripts.h"

#include <string>

#include "lock_scripts.h"  // next_fence_lua(), lazy_clock_lua(): shared with RedisMutex

namespace lockstep::fair_scripts {

namespace {

// Server time (never a client clock, L2) and the helpers every script shares. The clock is read
// only on the paths that need it (a token drawn, a waiter's expiry, a head looked at): an
// uncontended release never reads it, an uncontended acquire once (RedisMutex's rule:
// TIME and its conversions were the largest part of an uncontended cycle's server time).
// clock() and now_us / now_ms come from lock_scripts::lazy_clock_lua(), put before this prelude.
constexpr const char* kPrelude = R"lua(

-- A waiter that stopped re-checking (its process died or hangs) is skipped once its grace
-- has run out: it is popped from the head, so it cannot block the line forever.
local function drop_dead_heads(q, qx)
  while true do
    local head = redis.call('lindex', q, 0)
    if not head then return nil end
    clock()
    local exp = tonumber(redis.call('zscore', qx, head))
    if exp and exp > now_ms then return head end
    redis.call('lpop', q)
    redis.call('zrem', qx, head)
  end
end

-- next_fence(key, ttl, clock_us): RedisMutex's rule and text (lock_scripts.cpp, put before this
-- prelude by with_prelude, so the functions below see it as a local). The counter is shared with RedisMutex of the name: a token is always drawn,
-- never re-read.

-- Hands the lock to the oldest live waiter (L9: one waiter, by name) or frees it when nobody
-- waits. The granted waiter leaves the line here. SPUBLISH counts the subscribers that got the
-- grant: 0 means that waiter's process is gone (its service subscribes before it joins the
-- line), so the next one is granted. A waiter of `self` (the calling service) is not published
-- to: the caller delivers the grant in-process. Returns {waiter, token} for a grant the caller
-- must deliver, nil otherwise. A token drawn for a waiter found gone is skipped (gaps are fine;
-- the order is what fencing needs).
local function grant_next(lock, q, qx, fence, fence_ttl, channel_prefix, self)
  for _ = 1, 64 do
    local head = drop_dead_heads(q, qx)
    if not head then break end
    redis.call('lpop', q)
    redis.call('zrem', qx, head)
    local service = string.match(head, '^([^:]+):')
    local lease = string.match(head, ':(%d+)$')
    if service and lease then
      clock()
      local token = string.format('%.0f', next_fence(fence, fence_ttl, now_us))
      redis.call('set', lock, head .. '#' .. token, 'px', lease)
      if service == self then return {head, token} end
      if redis.call('spublish', channel_prefix .. service, head .. ' ' .. token) > 0 then return nil end
    end
  end
  redis.call('del', lock)
  return nil
end
)lua";

std::string with_prelude(const char* body) {
    return std::string(lock_scripts::next_fence_lua()) + lock_scripts::lazy_clock_lua() + kPrelude + body;
}

}  // namespace

// KEYS: 1 lock, 2 queue, 3 queue expiries, 4 fence.
// ARGV: 1 waiter id, 2 lease ms, 3 grace ms, 4 queue? (1: join or stay in the line when busy;
//       0: a try_lock, never queues), 5 fence counter TTL ms.
// Returns {1, token} when acquired (the lock key's value is then the waiter id alone), {0, ms
// until the holder's lease ends} when busy.
// An uncontended acquire is 4 calls: LINDEX (nobody waits), SET … NX PX GET (takes the free lock
// and reads the holder of a busy one in the same call), TIME and the counter's SET … GET. No
// string is built: the value is the waiter id, unique per attempt; only a grant by a release
// writes "<waiter id>#<token>" (the token the waiter learns from the message).
const RedisScript& acquire() {
    static const RedisScript s(with_prelude(R"lua(
-- FIFO: a free lock goes to the oldest live waiter; nobody may overtake it (no barging).
-- Nobody waits (the uncontended case): one SET takes a free lock or reads a busy one's holder.
local head = redis.call('lindex', KEYS[2], 0)
local holder
if not head then
  holder = redis.call('set', KEYS[1], ARGV[1], 'nx', 'px', ARGV[2], 'get')
  if not holder then
    return {1, next_fence(KEYS[4], ARGV[5], clock())}
  end
else
  holder = redis.call('get', KEYS[1])
  -- The line is only cleaned when the lock is free (a held lock is handed on by its release):
  -- a live waiter that re-checks late keeps its place while the lock is held.
  if not holder then head = drop_dead_heads(KEYS[2], KEYS[3]) end
end
-- Granted already, and the grant's message was lost (the subscription dropped) or is late: the
-- waiter holds the lock. A fresh token, drawn (not read back from the value: the counter is
-- shared, a token is handed out once), and the value becomes the waiter id alone, so the stale
-- message (which names "<waiter id>#<grant token>") can no longer undo the hold.
if holder then
  local mine = ARGV[1] .. '#'
  if string.sub(holder, 1, #mine) == mine then
    redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2])
    return {1, next_fence(KEYS[4], ARGV[5], clock())}
  end
elseif not head or head == ARGV[1] then
  -- The lock is free and this waiter heads the line (it leaves the line holding the lock), or
  -- every waiter in line was dead.
  if head then
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], ARGV[1])
  end
  redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2])
  return {1, next_fence(KEYS[4], ARGV[5], clock())}
end
clock()
if ARGV[4] == '1' then
  -- ZADD answers 1 for a new waiter only: it joins the line's tail (arrival order is the
  -- server's, not the client's); a waiter already in line only refreshes its expiry.
  if redis.call('zadd', KEYS[3], now_ms + tonumber(ARGV[3]), ARGV[1]) == 1 then
    redis.call('rpush', KEYS[2], ARGV[1])
  end
  local keep = tonumber(ARGV[3]) * 2 + tonumber(ARGV[2])
  redis.call('pexpire', KEYS[2], keep)
  redis.call('pexpire', KEYS[3], keep)
end
-- The wait hint: until the holder's lease ends. A free lock here has an older live waiter at
-- the head (it was freed without a release: a lease ran out): that waiter takes it at its own
-- re-check, so wait until its place in line would expire, not 0 ms (every waiter behind it
-- polled once a millisecond). A key without a TTL (written from outside): the grace.
local ttl = redis.call('pttl', KEYS[1])
if ttl == -2 and head then
  ttl = tonumber(redis.call('zscore', KEYS[3], head)) - now_ms
elseif ttl < 0 then
  ttl = tonumber(ARGV[3])
end
if ttl < 1 then ttl = 1 end
return {0, ttl}
)lua"));
    return s;
}

// KEYS: 1 lock, 2 queue, 3 queue expiries, 4 fence.
// ARGV: 1 the hold's value, 2 channel prefix, 3 fence counter TTL ms, 4 this service's id.
// Returns 0 when the lock is not ours (lost, L3), 1 when released (freed, or granted to the next
// waiter of another service), {waiter, token} when granted to a waiter of this service.
const RedisScript& release() {
    static const RedisScript s(with_prelude(R"lua(
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
local g = grant_next(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[3], ARGV[2], ARGV[4])
if g then return g end
return 1
)lua"));
    return s;
}

// KEYS: 1 lock. ARGV: 1 the hold's value, 2 lease ms. 1 renewed, 0 the hold is gone (L5: lost).
const RedisScript& renew() {
    static const RedisScript s(R"lua(
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('pexpire', KEYS[1], ARGV[2])
return 1
)lua");
    return s;
}

// A waiter that gives up (timeout, error) leaves the line. If a grant to it was made meanwhile
// (its message in flight), the lock is its own: it is handed on as a release would, never left
// held by a waiter that is gone. If the lock is free, the new head is granted it, so the line
// does not wait for the leaver's grace.
// KEYS: 1 lock, 2 queue, 3 queue expiries, 4 fence.
// ARGV: 1 waiter id, 2 channel prefix, 3 fence counter TTL ms, 4 this service's id,
//       5 the exact grant to undo ("<waiter>#<token>": an undeliverable grant) or "" (any grant).
// Returns 1, or {waiter, token} when it granted a waiter of this service.
const RedisScript& leave() {
    static const RedisScript s(with_prelude(R"lua(
redis.call('lrem', KEYS[2], 0, ARGV[1])
redis.call('zrem', KEYS[3], ARGV[1])
local holder = redis.call('get', KEYS[1])
local granted
if ARGV[5] ~= '' then
  granted = holder == ARGV[5]
else
  -- The waiter's own script took the lock (value: its id) and the reply never reached it, or a
  -- release granted it the lock ("<id>#<token>").
  local mine = ARGV[1] .. '#'
  granted = holder and (holder == ARGV[1] or string.sub(holder, 1, #mine) == mine)
end
if granted or not holder then
  local g = grant_next(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[3], ARGV[2], ARGV[4])
  if g then return g end
end
return 1
)lua"));
    return s;
}

}  // namespace lockstep::fair_scripts
