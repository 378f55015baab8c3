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
-- Versions are canonical decimal strings (no leading zeros): longer is larger, then bytewise.
local function newer(a, b)
  if #a ~= #b then return #a > #b end
  return a > b
end
local cur = redis.call('GET', KEYS[1])
if cur then
  local cv = string.match(cur, '^v(%d+):')
  if cv and (string.sub(cv, 1, 1) ~= '0' or cv == '0') then
    -- A "not found" never replaces a value: the value may come from a newer insert (C7).
    if ARGV[2] == '' then return 0 end
    if cv == ARGV[2] then return 2 end
    -- C1 (and C2 under WriteThrough): an older version never replaces a newer one.
    if not newer(ARGV[2], cv) then return 0 end
  end
  -- Otherwise the key holds a "not found" (older than any value), a loader's marker (a
  -- committed version is welcome; the loader's own fill is checked the same way), or bytes
  -- that do not decode: replace it.
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
return 1
)lua");
    return script;
}

const RedisScript& fill_if_marker() {
    static const RedisScript script(R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then
  -- Our marker survived: no write deleted the key since our miss, so what we read is current.
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

}  // namespace lockstep::entry_scripts
