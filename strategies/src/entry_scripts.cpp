#include "entry_scripts.h"

namespace lockstep::entry_scripts {

const RedisScript& claim() {
    static const RedisScript script(R"lua(
local cur = redis.call('GET', KEYS[1])
if not cur then
  -- Empty: the caller becomes the one loader of this key across processes (C6). Under Lease
  -- this marker is also the lease: a write's DEL destroys it, and the fill is refused (C2, C4).
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1}
end
if string.sub(cur, 1, 2) == 'L:' then
  -- Another reader's marker: it is loading; the caller waits for its value (C6).
  return {2}
end
-- A value or a "not found" landed since the caller's miss: hand it back instead of loading.
return {3, cur}
)lua");
    return script;
}

const RedisScript& fill_if_newer() {
    static const RedisScript script(R"lua(
-- A writer's set after COMMIT (WriteThrough). ARGV[2] is the version it committed: the newest
-- version of the row at that moment. It may only REFRESH a value that is provably older; in
-- every other case it clears the key so that the next reader loads from the database.
-- Versions are canonical decimal strings (no leading zeros): longer is larger, then bytewise.
local function newer(a, b)
  if #a ~= #b then return #a > #b end
  return a > b
end
local cur = redis.call('GET', KEYS[1])
if not cur then
  -- B2: the key is empty (never cached, evicted, expired, deleted). Storing here could put an
  -- old version back after a newer one was evicted; a reader fills it under its own marker.
  return 3
end
local cv = string.match(cur, '^v(%d+):')
if cv and (string.sub(cv, 1, 1) ~= '0' or cv == '0') then
  if cv == ARGV[2] then return 2 end
  if newer(ARGV[2], cv) then
    -- C1: an older value is replaced by the newer version.
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
    return 1
  end
  -- The key holds a higher version than this commit: a newer write's set landed first (C1), or
  -- the versions went backwards (C11: a raw-SQL reset, a clock step). Either way the entry may
  -- contradict the database: delete it, so a refused set never pins it beyond this write.
  redis.call('DEL', KEYS[1])
  return 0
end
-- A reader's marker (its load may predate this commit: destroy its lease, C2/C4), a "not
-- found" (it may predate a remove that followed this write), or bytes that do not decode.
redis.call('DEL', KEYS[1])
return 3
)lua");
    return script;
}

const RedisScript& fill_if_marker() {
    static const RedisScript script(R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then
  -- Our marker survived: no write deleted or replaced it since our miss, so what we read is
  -- the newest committed version (B2: an evicted newer entry took our marker with it, C11: a
  -- remove + re-insert deleted it). Lease and WriteThrough backfill only this way.
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
-- The marker is gone: a write committed and deleted the key after our miss, and our read may
-- predate that commit (C2, C4); or the marker expired. Refuse the possibly stale value.
return 0
)lua");
    return script;
}

const RedisScript& remove_if_equals() {
    static const RedisScript script(R"lua(
-- Compare and delete in one step: give back our own marker, or drop an entry that did not
-- decode, without touching what another client has put there since.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
)lua");
    return script;
}

const RedisScript& refill_if_unchanged() {
    static const RedisScript script(R"lua(
-- Stale-while-revalidate: the one refiller of a stale entry stores what it loaded only if the
-- key still holds the very entry it saw stale. A write since then deleted it (or replaced it
-- with a newer version), and our database read may predate that write's commit (C2): refuse.
local stored = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  stored = 1
end
-- Give back our refill marker (only ours: it may have expired and been taken by another).
if redis.call('GET', KEYS[2]) == ARGV[4] then redis.call('DEL', KEYS[2]) end
return stored
)lua");
    return script;
}

}  // namespace lockstep::entry_scripts
