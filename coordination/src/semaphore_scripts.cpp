#include "semaphore_scripts.h"

namespace lockstep::detail {

namespace {

constexpr const char* kClock = R"lua(
local t = redis.call('time')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
)lua";

// The zset lives at least as long as its longest permit: a permit never outlives its key, and an
// idle semaphore's key goes within one lease of its last renewal (no key without a TTL).
constexpr const char* kKeepAlive = R"lua(
local function keep_alive(key, lease)
  if redis.call('pttl', key) < lease then redis.call('pexpire', key, lease) end
end
)lua";

}  // namespace

const RedisScript& semaphore_acquire_script() {
    static const RedisScript script(std::string(kClock) + kKeepAlive + R"lua(
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
-- A dead (or paused) holder's permit: its expiry passed unrenewed. Purged before counting, so
-- it frees its slot (RACES L5 for permits: the paused holder learns it at its next renewal).
redis.call('zremrangebyscore', KEYS[1], '-inf', now_ms)
local lease = tonumber(ARGV[2])
if redis.call('zcard', KEYS[1]) >= tonumber(ARGV[1]) then
  -- Full: tell the waiter when the earliest permit would expire, its fallback wake-up.
  local first = redis.call('zrange', KEYS[1], 0, 0, 'withscores')
  return {0, tonumber(first[2]) - now_ms}
end
redis.call('zadd', KEYS[1], now_ms + lease, ARGV[3])
keep_alive(KEYS[1], lease)
-- The fencing token: last + 1, never below the server clock in µs, so tokens keep increasing
-- after the counter expired with an idle semaphore (the same rule as the locks' next_fence).
local token = now_us
local last = tonumber(redis.call('get', KEYS[2]))
if last and last >= token and last < 9007199254740992 then token = last + 1 end
redis.call('set', KEYS[2], token, 'px', lease)
return {1, token}
)lua");
    return script;
}

const RedisScript& semaphore_renew_script() {
    static const RedisScript script(std::string(kClock) + kKeepAlive + R"lua(
local lease = tonumber(ARGV[1])
local result = {}
for i = 2, #ARGV do
  local expiry = tonumber(redis.call('zscore', KEYS[1], ARGV[i]))
  if expiry and expiry > now_ms then
    redis.call('zadd', KEYS[1], 'xx', now_ms + lease, ARGV[i])
    result[#result + 1] = 1
  else
    -- Gone (purged by an acquirer, deleted) or expired unrenewed: another holder may have its
    -- slot now, so it is not revived (L5). An expired entry is removed.
    if expiry then redis.call('zrem', KEYS[1], ARGV[i]) end
    result[#result + 1] = 0
  end
end
if redis.call('exists', KEYS[1]) == 1 then keep_alive(KEYS[1], lease) end
return result
)lua");
    return script;
}

const RedisScript& semaphore_release_script() {
    static const RedisScript script(std::string(kClock) + R"lua(
local expiry = tonumber(redis.call('zscore', KEYS[1], ARGV[1]))
-- Not ours any more: releasing must not free a slot someone else holds (L3).
if not expiry then return 0 end
redis.call('zrem', KEYS[1], ARGV[1])
-- Expired unrenewed: its slot was free to take already; report the loss.
if expiry <= now_ms then return -1 end
-- One message wakes the waiters (L7): a slot is free. Sharded, as RedisClient::subscriber()
-- listens (SSUBSCRIBE): a classic PUBLISH never reaches it, and the waiters slept until the
-- earliest permit's expiry.
redis.call('spublish', ARGV[2], '1')
return 1
)lua");
    return script;
}

const RedisScript& semaphore_count_script() {
    static const RedisScript script(std::string(kClock) + R"lua(
redis.call('zremrangebyscore', KEYS[1], '-inf', now_ms)
return redis.call('zcard', KEYS[1])
)lua");
    return script;
}

}  // namespace lockstep::detail
