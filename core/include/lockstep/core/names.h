// The one rule for every name a user gives lockstep: lock names (RedisMutex, RedisReadWriteLock,
// every LockService backend) and entity names (Entity::name), checked by one function.
//
//   1 to kMaxNameLength (128) bytes of  A-Z a-z 0-9  _  -  .  :  /
//
// Why these and no others:
//   - '{' and '}' would change the Redis Cluster hash tag (every key of a lock or an entity id
//     shares `{<name>}`; Redis hashes the FIRST braced part of a key);
//   - NUL, newlines, spaces and other control or non-ASCII bytes end up in log lines, MySQL
//     GET_LOCK names and ZooKeeper node names, where they are truncated, split or refused;
//   - ZooKeeper forbids some code points in node names and '/' separates path parts: the
//     ZooKeeper backend escapes '/' (and its escape '%'), so '/' stays usable ("jobs/nightly");
//   - MySQL's GET_LOCK takes at most 64 characters: the MySQL backend hashes longer names (with
//     its prefix) into 64, so any name of this rule fits.
// A repository's lock names are "<entity>:<id>": entity names may contain ':' too, and no two
// entities' ids can produce the same lock name (an id is a decimal integer with no ':').
//
// Thread safety: a plain function.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace lockstep {

inline constexpr std::size_t kMaxNameLength = 128;

// True when `c` may appear in a name.
bool is_name_char(char c) noexcept;

// Throws ConfigError (part `part`, e.g. "lock name", "entity.name") naming the first offending
// byte or the length when `name` breaks the rule above. Never throws anything else.
void check_name(std::string_view part, std::string_view name);

}  // namespace lockstep
