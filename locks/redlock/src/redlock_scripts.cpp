#include "redlock_scripts.h"

namespace lockstep::redlock_detail {

const RedisScript& acquire_script() {
    // The key and the counter change in ONE script: a master's counter rises only while the
    // caller takes its key, so on a master two holders' increments are ordered by the holds
    // themselves (the fencing argument). A refusal still reports the counter (diagnostics).
    static const RedisScript s(R"lua(
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, redis.call('INCR', KEYS[2])}
end
return {0, tonumber(redis.call('GET', KEYS[2]) or '0')}
)lua");
    return s;
}

const RedisScript& commit_script() {
    // Only while the caller holds this master's key (L8: a key that expired or was lost in a
    // restart must not carry the token), and only upwards (a counter never falls).
    static const RedisScript s(R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if tonumber(redis.call('GET', KEYS[2]) or '0') < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[2])
end
return 1
)lua");
    return s;
}

const RedisScript& renew_script() {
    // Never recreates a key that is gone (expired or lost in a restart): that master's vote is
    // lost for good (L5), and a second holder may own it now.
    static const RedisScript s(R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
)lua");
    return s;
}

const RedisScript& release_script() {
    // Only the caller's own key (L10): a lapsed holder must not delete the next holder's key.
    // With a channel (ARGV[2]) the deletion is announced on this master (the message is the
    // releasing owner, for diagnostics): a waiter subscribed there retries (L7: waiters wait for
    // a message, not for a poll). Without one (the cleanup
    // of a failed attempt) nothing is announced: waking the rival of a split vote at once would
    // only make both split again.
    static const RedisScript s(R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if ARGV[2] then redis.call('SPUBLISH', ARGV[2], ARGV[1]) end
  return 1
end
return 0
)lua");
    return s;
}

}  // namespace lockstep::redlock_detail
