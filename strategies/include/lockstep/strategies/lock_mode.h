// Lock modes of a CachedRepository: which distributed lock, if any, guards the cache steps of
// one key. The locks come from locks/ (RedisMutex, RedisReadWriteLock), one per key, named
// `<entity>:<id>`, so their keys share the entry's hash tag.
//
//   None       no lock. What is closed depends on the write strategy alone.
//   Mutex      a per-key RedisMutex around the MISS path of a read (re-check, DB read, backfill)
//              and around the whole write (transaction and cache steps). Hits take no lock.
//              Guarantee: no backfill can interleave with a write of the same key, so a stale
//              value is never written into the cache (C1-C4 closed, for every strategy).
//              Not guaranteed: a hit between a write's COMMIT and its DEL returns the previous
//              value (the window is one round trip; ReadWrite closes it). "Lock only on a miss".
//   ReadWrite  a per-key RedisReadWriteLock: shared for every read (hits too), exclusive for
//              writes. Guarantee: in addition to Mutex's, a read that starts after a write
//              returned sees that write, and no read overlaps a write's commit-to-delete window.
//              Cost: every read takes and releases a shared lock (two scripts per hit).
//
// Both guarantees hold only while the lock's lease holds: a hold found lost is counted
// (locks_lost), logged, and answered with a compensating DEL of the key.
// Redis unreachable: reads fall back to the database without filling; writes proceed without
// the lock (the database row lock still serialises them) and queue their deletes.
#pragma once

#include <string_view>

namespace lockstep {

enum class LockMode { None, Mutex, ReadWrite };

std::string_view to_string(LockMode mode) noexcept;

}  // namespace lockstep
