// The Lua scripts of the distributed locks. Comments name the docs/races.md row each branch closes.
//
// Time: every expiry computed in a script uses the server clock (redis.call('TIME'), allowed
// in scripts since Redis 5 with effect replication, the only mode of Redis 7), never a client
// clock (L2). Numbers: Lua numbers are doubles; every value here (µs since 1970 ~ 1.8e15,
// fencing tokens, ms) is an integer below 2^53, so it is exact. Passed to redis.call as a number
// it is written '%.17g' by Redis (all digits, no exponent below 1e17); string.format('%.0f') is
// only needed where a number becomes a string inside Lua (Lua's tostring would use exponent
// notation).
#include "lock_scripts.h"

#include <string>

namespace lockstep::lock_scripts {

namespace {

// Server time: now_ms for expiries, now_us for fencing tokens and queue order.
constexpr const char* kNow = R"lua(
local t = redis.call('time')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
)lua";

// Fencing token for a new acquisition: strictly greater than the last one handed out while the
// counter lives (last + 1), and never below the server clock in µs. The clock floor keeps tokens
// increasing after the counter expired, was deleted, or was lost with a restarted server (no
// persistence) or a failover, as long as the server clock does not go back (docs/locks.md).
// Cost: one SET … GET writes the clock and reads the last token in one call; only when
// the last token is not below the clock (the clock went back, or two acquisitions in one µs) a
// second SET writes last + 1. Numbers go to Redis as Lua numbers (Redis formats them '%.17g':
// exact integers below 2^53), so no string.format on the server's hot path.
constexpr const char* kNextFence = R"lua(
local function next_fence(key, ttl, clock_us)
  local token = clock_us
  local last = tonumber(redis.call('set', key, token, 'px', ttl, 'get'))
  -- A counter written from outside ('inf', 'nan', beyond 2^53) is not a token: the clock rules.
  if last and last >= token and last < 9007199254740992 then
    token = last + 1
    redis.call('set', key, token, 'px', ttl)
  end
  return token
end
)lua";

// Server time for the mutex scripts, read only on the paths that need it (a fresh acquisition's
// fencing token, a waiter's queue entry, a release that has waiters to wake): TIME and its two
// string-to-number conversions were the largest part of an uncontended cycle's server time.
constexpr const char* kLazyClock = R"lua(
local now_us, now_ms
local function clock()
  if not now_us then
    local t = redis.call('time')
    now_us = t[1] * 1000000 + t[2]
    now_ms = math.floor(now_us / 1000)
  end
  return now_us
end
)lua";

// B1 audit: a queue entry whose expiry entry is missing (qx evicted or deleted) is not cleaned by
// the scan below, but nothing waits for it either (an acquire never consults the queue: barging
// is allowed), and it leaves the queue when it reaches the head: woken if its process listens,
// skipped if not. So it costs at most one wake-up, never a livelock.
// L9: wake exactly one waiter: the oldest live entry of the queue whose process still listens.
// Entries past their expiry (a waiter that died) are dropped; the woken entry is removed (it
// re-queues with its old arrival score if it loses to a barging acquirer). PUBLISH returns how
// many subscribers got it: 0 means that waiter's process is gone, so the next one is tried.
// The hand-off: when the woken waiter has waited at least `after_us`, the free
// lock is reserved for it: the lock key becomes {'~' = waiter} with a TTL of `window` ms. Every
// acquire finds it busy (pttl > 0, not the owner) except that waiter's own queuing try, which
// takes it. The TTL bounds what a woken waiter that died or froze can cost (L1's rule: nothing
// in a lock key lives without a TTL). `window` nil or 0 (an old caller, or hand-off off): the
// lock stays free and the woken waiter races like anyone (barging).
constexpr const char* kWakeNext = R"lua(
local function wake_next(lock_key, q, qx, window, after_us)
  -- Nobody waits (the common, uncontended case): one cheap check instead of two range scans.
  if redis.call('exists', q) == 0 then return 0 end
  clock()
  local dead = redis.call('zrangebyscore', qx, '-inf', now_ms, 'limit', 0, 64)
  for _, w in ipairs(dead) do
    redis.call('zrem', q, w)
    redis.call('zrem', qx, w)
  end
  for _ = 1, 16 do
    local first = redis.call('zrange', q, 0, 0, 'withscores')
    local head = first[1]
    if not head then return 0 end
    redis.call('zrem', q, head)
    redis.call('zrem', qx, head)
    local client = string.match(head, '^([^:]+):')
    if client and redis.call('spublish', lock_key .. ':ch:' .. client, head) > 0 then
      -- A score from outside that is not a number reserves nothing (B1: the waiter still wakes).
      local arrived = tonumber(first[2])
      if window and window > 0 and arrived and now_us - arrived >= after_us then
        redis.call('hset', lock_key, '~', head)
        redis.call('pexpire', lock_key, window)
      end
      return 1
    end
  end
  return 0
end
)lua";

// Read-write lock helpers. Each reader has its own lease: its score in the expiry zset.
constexpr const char* kReaders = R"lua(
-- A reader whose lease ran out is gone, whatever other readers do: a dead reader blocks
-- writers for at most its own lease.
local function clean_readers(r, rx)
  local dead = redis.call('zrangebyscore', rx, '-inf', now_ms)
  for _, o in ipairs(dead) do redis.call('hdel', r, o) end
  if #dead > 0 then redis.call('zremrangebyscore', rx, '-inf', now_ms) end
  -- B1 pattern: a reader counts only through its lease entry. When the two keys disagree (rx
  -- evicted or deleted from outside, a field written from outside), a reader without a lease
  -- is gone, and a lease without a reader is dropped; nothing else would ever remove either.
  if redis.call('hlen', r) ~= redis.call('zcard', rx) then
    for _, o in ipairs(redis.call('hkeys', r)) do
      if not redis.call('zscore', rx, o) then redis.call('hdel', r, o) end
    end
    for _, o in ipairs(redis.call('zrange', rx, 0, -1)) do
      if redis.call('hexists', r, o) == 0 then redis.call('zrem', rx, o) end
    end
  end
  return #dead
end
-- The reader keys live as long as the longest reader lease, so they vanish with the last reader.
local function keep_readers(r, rx)
  local last = redis.call('zrange', rx, -1, -1, 'withscores')
  if last[2] then
    local ttl = tonumber(last[2]) - now_ms + 1
    redis.call('pexpire', r, ttl)
    redis.call('pexpire', rx, ttl)
  else
    redis.call('del', r, rx)
  end
end
)lua";

// Read-write lock waiting claims (writer preference and phase fairness). A waiting reader or
// writer holds a claim: its arrival (µs) in the claims zset of its kind, and its expiry (ms) in
// the shared expiry zset under 'r:'/'w:' .. owner. A waiter renews its claim at every re-check
// (at least every claim refresh); a dead waiter's claim expires and stops blocking anyone.
constexpr const char* kClaims = R"lua(
local function clean_claims(wq, rq, qx)
  local dead = redis.call('zrangebyscore', qx, '-inf', now_ms)
  for _, m in ipairs(dead) do
    local q = wq
    if string.sub(m, 1, 2) == 'r:' then q = rq end
    redis.call('zrem', q, string.sub(m, 3))
  end
  if #dead > 0 then redis.call('zremrangebyscore', qx, '-inf', now_ms) end
end
-- Is there a claim older than `mine` in `q` (other than the caller's)? Then the caller waits:
-- returns how long until that claim could expire; nil when nothing older waits.
-- B1: a claim counts only through its expiry entry. A claim whose entry is missing (the qx key
-- evicted or deleted from outside, its waiter killed) or past, or further ahead than any waiter
-- ever sets it (refresh + grace: written from outside, or a server clock that stepped back), is
-- expired here and removed: otherwise nothing would ever remove it (clean_claims walks the
-- expiry entries) and every younger waiter would re-check at once, for ever. Each pass removes
-- one claim, so the loop ends.
local function blocked_by(q, qx, kind, owner, mine)
  local longest = tonumber(ARGV[6]) + tonumber(ARGV[7])
  while true do
    local first = redis.call('zrange', q, 0, 0, 'withscores')
    if not first[1] or first[1] == owner or tonumber(first[2]) >= mine then return nil end
    local expiry = tonumber(redis.call('zscore', qx, kind .. first[1]))
    if expiry and expiry > now_ms and expiry - now_ms <= longest then return expiry - now_ms end
    redis.call('zrem', q, first[1])
    redis.call('zrem', qx, kind .. first[1])
  end
end
local function drop_claim(q, qx, kind, owner)
  redis.call('zrem', q, owner)
  redis.call('zrem', qx, kind .. owner)
end
-- Busy: a caller that will wait claims its turn (keeping its first arrival) and is told when to
-- re-check: at the hint, at the latest after one claim refresh, never after its own deadline.
local function wait_turn(hint, q, qx, kind, owner)
  local wait_left = tonumber(ARGV[5])
  if hint < 0 then hint = tonumber(ARGV[6]) end
  if wait_left >= 0 and wait_left < hint then hint = wait_left end
  if ARGV[4] == '1' then
    local refresh = tonumber(ARGV[6])
    if hint > refresh then hint = refresh end
    if hint < 1 then hint = 1 end
    local keep = hint + tonumber(ARGV[7])
    redis.call('zadd', q, 'nx', string.format('%.0f', now_us), owner)
    redis.call('zadd', qx, now_ms + keep, kind .. owner)
    for _, k in ipairs({q, qx}) do
      if redis.call('pttl', k) < keep then redis.call('pexpire', k, keep) end
    end
  end
  if hint < 1 then hint = 1 end
  return {0, hint}
end
)lua";

std::string join(std::initializer_list<const char*> parts) {
    std::string s;
    for (const char* p : parts) s += p;
    return s;
}

}  // namespace

// KEYS: 1 lock hash, 2 fence counter; a waiter adds 3 waiter queue (arrival order),
//       4 waiter expiries (a plain try passes 2 keys: it never touches the queue).
// ARGV: 1 owner, 2 lease ms, 3 fence counter TTL ms, or 're' when the caller re-enters a hold it
//       believes it has; a waiter adds 4 waiter id, 5 its queue score ('' = first time),
//       6 its remaining wait ms (-1 = unbounded), 7 waiter grace ms.
// Returns {2, token, server time µs} acquired; {1, 0} re-entered; {-2, 0} caller's hold is gone;
//         {0, ms} busy: ms = re-check after (pttl, or for a waiter min(pttl, wait left)),
//         and a waiter also gets {0, ms, queue score}.
// Stages, cheapest first: one PTTL tells free (-2), foreign without TTL (-1) and held;
// a free lock is taken with HSET, PEXPIRE and the fencing token (TIME, SET … GET): 5 calls.
const RedisScript& mutex_acquire() {
    static const RedisScript script(join({kLazyClock, kNextFence, R"lua(
local owner = ARGV[1]
local lease = ARGV[2]
local reentry = ARGV[3] == 're'
local waiter = ARGV[4]
local pttl = redis.call('pttl', KEYS[1])
-- L1, L2: owner and server-side TTL are set in one atomic step; no client clock involved.
local function take()
  redis.call('hset', KEYS[1], owner, 1)
  redis.call('pexpire', KEYS[1], lease)
  if waiter then
    redis.call('zrem', KEYS[3], waiter)
    redis.call('zrem', KEYS[4], waiter)
  end
  -- The grant's server time goes back too (Hold::server_time_at_grant): the fencing token
  -- read the clock already, so a caller that needs the time of its acquisition (JobLock's
  -- slot) saves a round trip for one more integer in the reply.
  local token = next_fence(KEYS[2], ARGV[3], clock())
  return {2, token, now_us}
end
if pttl == -2 then
  -- L10: the caller is re-entering a hold that is no longer there (lease ran out, server
  -- restarted): report it; re-creating it would hide that the outer section was unprotected.
  if reentry then return {-2, 0} end
  return take()
end
-- The lock is reserved for the waiter the last release woke (wake_next), and
-- this is that waiter: it takes the lock; anyone else finds it busy until the window ends.
if waiter and pttl > 0 and redis.call('hget', KEYS[1], '~') == waiter then
  redis.call('del', KEYS[1])
  return take()
end
-- B6: every hold these scripts create gets its TTL in the same step (L1). A lock hash without
-- one was written from outside (an HSET onto a free lock) and would block the name for ever:
-- it is foreign, and expires after one lease like an abandoned hold.
if pttl == -1 then
  redis.call('pexpire', KEYS[1], lease)
  pttl = tonumber(lease)
end
-- L6: the owner again: a reentrant hold, one more count, lease refreshed, no new token.
if redis.call('hexists', KEYS[1], owner) == 1 then
  redis.call('hincrby', KEYS[1], owner, 1)
  redis.call('pexpire', KEYS[1], lease)
  return {1, 0}
end
-- L10, as above: held, but not by the caller any more.
if reentry then return {-2, 0} end
if not waiter then return {0, pttl} end
-- L7, L9: the waiter queues (keeping its first arrival score on later tries, so losing a race
-- to a barging acquirer does not cost its place) and sleeps until a release wakes it or the
-- holder's lease could have run out. Its entry expires if it dies (grace after its re-check).
clock()
local score = ARGV[5]
if score == '' then score = now_us end
local again = pttl
local wait_left = tonumber(ARGV[6])
if wait_left >= 0 and wait_left < again then again = wait_left end
if again < 1 then again = 1 end
local keep = again + tonumber(ARGV[7])
redis.call('zadd', KEYS[3], 'nx', score, waiter)
redis.call('zadd', KEYS[4], now_ms + keep, waiter)
for i = 3, 4 do
  if redis.call('pttl', KEYS[i]) < keep then redis.call('pexpire', KEYS[i], keep) end
end
-- The score goes back as an integer reply (exact below 2^53), not a formatted float.
return {0, again, tonumber(score)}
)lua"}));
    return script;
}

// KEYS: 1 lock hash, 2 waiter queue, 3 waiter expiries.
// ARGV: 1 owner, 2 '1' for the owner's last unlock (its local count reached zero),
//       3 hand-off window ms, 4 hand-off after µs (wake_next; both optional: no hand-off).
// Returns 0 not held by this owner (nothing changed); 1 still held (reentrant); 2 released.
const RedisScript& mutex_release() {
    static const RedisScript script(join({kLazyClock, kWakeNext, R"lua(
-- L3, L4, L10: check and delete in one script: a release by anyone but the owner changes
-- nothing (the owner's lease ran out and someone else holds it now, or it never held it).
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return 0 end
-- L6: an inner unlock of a reentrant hold only counts down.
if ARGV[2] ~= '1' then
  if redis.call('hincrby', KEYS[1], ARGV[1], -1) > 0 then return 1 end
end
-- The owner's last unlock deletes the hold whatever the count says (a re-entry whose reply
-- was lost may have counted once more than the owner knows).
redis.call('del', KEYS[1])
-- L7, L9: hand over to one waiter by message, no polling, no herd.
wake_next(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[3]), tonumber(ARGV[4]) or 0)
return 2
)lua"}));
    return script;
}

// A waiter that gives up (deadline, error) leaves the queue. If the lock is free at that moment
// the wake-up it may have consumed is passed on, so it is never lost with the waiter.
// A woken waiter that gives up inside its hand-off window gives the reservation back at once
// (rather than let it block the lock for the rest of the window) and it passes to the next.
// KEYS: 1 lock hash, 2 waiter queue, 3 waiter expiries. ARGV: 1 waiter id, 2 hand-off window
// ms, 3 hand-off after µs (both optional). Returns 1 if it woke someone.
const RedisScript& mutex_leave_queue() {
    static const RedisScript script(join({kLazyClock, kWakeNext, R"lua(
redis.call('zrem', KEYS[2], ARGV[1])
redis.call('zrem', KEYS[3], ARGV[1])
if redis.call('hget', KEYS[1], '~') == ARGV[1] then redis.call('del', KEYS[1]) end
if redis.call('exists', KEYS[1]) == 0 then
  return wake_next(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[2]), tonumber(ARGV[3]) or 0)
end
return 0
)lua"}));
    return script;
}

// KEYS: 1 hold hash (mutex or rw writer). ARGV: 1 owner, 2 lease ms. Returns 1 renewed, 0 gone.
const RedisScript& hash_hold_renew() {
    static const RedisScript script(R"lua(
-- L5: extend only a hold that is still this owner's. A hold found gone is reported lost by the
-- client and never re-created (its lease ran out: someone else may have held it since).
-- Only ever extend (GT): a renewal of an earlier hold, in flight while the thread unlocked it
-- and locked the name again with a longer lease, finds the same owner and must not cut the new
-- hold's TTL below what its client counts on (two holders, lost() false).
if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  redis.call('pexpire', KEYS[1], ARGV[2], 'gt')
  return 1
end
return 0
)lua");
    return script;
}

// KEYS: 1 writer hash, 2 reader counts, 3 reader expiries, 4 writer claims, 5 reader claims,
//       6 claim expiries.
// ARGV: 1 owner, 2 lease ms, 3 '1' if the caller believes it holds the read side already,
//       4 '1' if the caller will wait (claims its turn), 5 caller's remaining wait ms
//       (-1 = unbounded), 6 claim refresh ms, 7 waiter grace ms.
// Returns {2, 0, server time µs} acquired; {1, 0} re-entered; {-2, 0} caller's hold is gone; {0, ms} busy,
// re-check after ms.
const RedisScript& rw_read_acquire() {
    static const RedisScript script(join({kNow, kReaders, kClaims, R"lua(
local owner = ARGV[1]
local lease = tonumber(ARGV[2])
-- B6, as in mutex_acquire: a writer hash without a TTL is foreign; it expires after one lease.
if redis.call('pttl', KEYS[1]) == -1 then redis.call('pexpire', KEYS[1], lease) end
clean_readers(KEYS[2], KEYS[3])
-- L6: a reader re-entering is let in even while a writer waits: refusing would deadlock it
-- against the writer that waits for it.
if redis.call('hexists', KEYS[2], owner) == 1 then
  redis.call('hincrby', KEYS[2], owner, 1)
  redis.call('zadd', KEYS[3], now_ms + lease, owner)
  keep_readers(KEYS[2], KEYS[3])
  return {1, 0}
end
-- L10: the caller's read hold is gone (its lease ran out): report, do not re-create.
if ARGV[3] == '1' then return {-2, 0} end
clean_claims(KEYS[4], KEYS[5], KEYS[6])
if redis.call('hexists', KEYS[1], owner) == 0 then
  local again
  if redis.call('exists', KEYS[1]) == 1 then
    -- Another writer holds it: wait for its release or the end of its lease.
    again = redis.call('pttl', KEYS[1])
  else
    -- Writer preference: a writer that has waited longer than this reader goes first, so a
    -- stream of new readers cannot starve it (and a reader that waited longer than the writer
    -- is not starved by it either: phase-fair).
    local mine = tonumber(redis.call('zscore', KEYS[5], owner)) or now_us
    again = blocked_by(KEYS[4], KEYS[6], 'w:', owner, mine)
  end
  if again then return wait_turn(again, KEYS[5], KEYS[6], 'r:', owner) end
end
-- Granted: no writer, or the writer is the caller itself (write -> read downgrade).
drop_claim(KEYS[5], KEYS[6], 'r:', owner)
redis.call('hset', KEYS[2], owner, 1)
redis.call('zadd', KEYS[3], now_ms + lease, owner)
keep_readers(KEYS[2], KEYS[3])
return {2, 0, now_us}
)lua"}));
    return script;
}

// KEYS: 1 reader counts, 2 reader expiries. ARGV: 1 owner, 2 '1' for the last unlock,
// 3 release channel. Returns 0 not held (or its lease ran out), 1 still held, 2 released.
const RedisScript& rw_read_release() {
    static const RedisScript script(join({kNow, kReaders, R"lua(
-- L3, L10: only the reader itself releases its read hold.
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return 0 end
-- A reader past its own lease is gone even if nobody has cleaned it up yet.
local expiry = redis.call('zscore', KEYS[2], ARGV[1])
if not expiry or tonumber(expiry) < now_ms then
  redis.call('hdel', KEYS[1], ARGV[1])
  redis.call('zrem', KEYS[2], ARGV[1])
  keep_readers(KEYS[1], KEYS[2])
  return 0
end
-- L6: inner unlock of a reentrant read hold.
if ARGV[2] ~= '1' then
  if redis.call('hincrby', KEYS[1], ARGV[1], -1) > 0 then return 1 end
end
redis.call('hdel', KEYS[1], ARGV[1])
redis.call('zrem', KEYS[2], ARGV[1])
clean_readers(KEYS[1], KEYS[2])
if redis.call('hlen', KEYS[1]) == 0 then
  -- L7: the last reader out wakes the waiting writers (message, not polling).
  redis.call('del', KEYS[1], KEYS[2])
  redis.call('spublish', ARGV[3], 'r')
else
  keep_readers(KEYS[1], KEYS[2])
end
return 2
)lua"}));
    return script;
}

// KEYS: 1 reader counts, 2 reader expiries. ARGV: 1 owner, 2 lease ms. Returns 1 renewed, 0 gone.
const RedisScript& rw_read_renew() {
    static const RedisScript script(join({kNow, kReaders, R"lua(
local expiry = redis.call('zscore', KEYS[2], ARGV[1])
-- L5: a reader whose own lease ran out is not revived, even if its entry is still there.
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 or not expiry or tonumber(expiry) < now_ms then
  redis.call('hdel', KEYS[1], ARGV[1])
  redis.call('zrem', KEYS[2], ARGV[1])
  keep_readers(KEYS[1], KEYS[2])
  return 0
end
-- Only ever extend (GT), as hash_hold_renew: a stale renewal of an earlier read hold of the
-- same owner must not cut a newer, longer one short and let a writer in.
redis.call('zadd', KEYS[2], 'gt', now_ms + tonumber(ARGV[2]), ARGV[1])
keep_readers(KEYS[1], KEYS[2])
return 1
)lua"}));
    return script;
}

// KEYS: 1 writer hash, 2 reader counts, 3 reader expiries, 4 writer claims, 5 reader claims,
//       6 claim expiries, 7 fence counter.
// ARGV: 1 owner, 2 lease ms, 3 '1' if the caller believes it holds the write side already,
//       4 '1' if the caller will wait (claims its turn), 5 caller's remaining wait ms
//       (-1 = unbounded), 6 claim refresh ms, 7 waiter grace ms, 8 fence counter TTL ms.
// Returns {2, token, server time µs} acquired; {1, 0} re-entered; {-2, 0} caller's hold is gone;
//         {-3, 0} the caller holds the read side (upgrade refused); {0, ms} busy.
const RedisScript& rw_write_acquire() {
    static const RedisScript script(join({kNow, kNextFence, kReaders, kClaims, R"lua(
local owner = ARGV[1]
local lease = tonumber(ARGV[2])
-- B6, as in mutex_acquire: a writer hash without a TTL is foreign; it expires after one lease.
if redis.call('pttl', KEYS[1]) == -1 then redis.call('pexpire', KEYS[1], lease) end
-- L6: the writer again.
if redis.call('hexists', KEYS[1], owner) == 1 then
  redis.call('hincrby', KEYS[1], owner, 1)
  redis.call('pexpire', KEYS[1], lease)
  return {1, 0}
end
-- L10: the caller's write hold is gone: report, do not re-create.
if ARGV[3] == '1' then return {-2, 0} end
clean_readers(KEYS[2], KEYS[3])
-- Read -> write upgrade is refused, never waited for: two upgrading readers would wait for
-- each other forever.
if redis.call('hexists', KEYS[2], owner) == 1 then return {-3, 0} end
clean_claims(KEYS[4], KEYS[5], KEYS[6])
local again
if redis.call('exists', KEYS[1]) == 1 then
  again = redis.call('pttl', KEYS[1])
elseif redis.call('hlen', KEYS[2]) > 0 then
  -- Readers hold it: re-check when the first reader lease could end (a dead reader's).
  local first = redis.call('zrange', KEYS[3], 0, 0, 'withscores')
  again = lease
  if first[2] then again = tonumber(first[2]) - now_ms end
else
  -- Free. Turns go by arrival among those waiting: readers that waited longer than this
  -- writer go first (they are not starved by a stream of writers), then older writers.
  local mine = tonumber(redis.call('zscore', KEYS[4], owner)) or now_us
  again = blocked_by(KEYS[5], KEYS[6], 'r:', owner, mine) or blocked_by(KEYS[4], KEYS[6], 'w:', owner, mine)
end
if again then return wait_turn(again, KEYS[4], KEYS[6], 'w:', owner) end
-- L1, L2: owner and TTL in one step, plus a fencing token.
drop_claim(KEYS[4], KEYS[6], 'w:', owner)
redis.call('hset', KEYS[1], owner, 1)
redis.call('pexpire', KEYS[1], lease)
local token = next_fence(KEYS[7], ARGV[8], now_us)
return {2, token, now_us}
)lua"}));
    return script;
}

// KEYS: 1 writer hash. ARGV: 1 owner, 2 '1' for the last unlock, 3 release channel.
// Returns 0 not held, 1 still held, 2 released.
const RedisScript& rw_write_release() {
    static const RedisScript script(R"lua(
-- L3, L4, L10: check and delete in one step; nobody but the writer releases it.
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return 0 end
if ARGV[2] ~= '1' then
  if redis.call('hincrby', KEYS[1], ARGV[1], -1) > 0 then return 1 end
end
redis.call('del', KEYS[1])
-- L7: wake this lock's waiters: every waiting reader may go now, or one writer.
redis.call('spublish', ARGV[3], 'w')
return 2
)lua");
    return script;
}

// A waiting reader or writer that gives up withdraws its claim and wakes those it kept out.
// KEYS: 1 claims of its kind (writer or reader claims), 2 claim expiries.
// ARGV: 1 owner, 2 'w:' or 'r:', 3 release channel. Returns 1 if it had a claim.
const RedisScript& rw_leave() {
    static const RedisScript script(R"lua(
redis.call('zrem', KEYS[2], ARGV[2] .. ARGV[1])
if redis.call('zrem', KEYS[1], ARGV[1]) == 1 then
  redis.call('spublish', ARGV[3], 'l')
  return 1
end
return 0
)lua");
    return script;
}

const char* next_fence_lua() { return kNextFence; }
const char* lazy_clock_lua() { return kLazyClock; }

}  // namespace lockstep::lock_scripts
