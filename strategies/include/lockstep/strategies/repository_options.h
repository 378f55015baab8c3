// RepositoryOptions: the per-entity choices of a CachedRepository. Plain struct, safe defaults.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "lockstep/strategies/background_scheduler.h"
#include "lockstep/strategies/lock_mode.h"
#include "lockstep/strategies/write_strategy.h"

namespace lockstep {

class LockService;
class MysqlPool;
class Outbox;
class RedisNearCache;

struct RepositoryOptions {
    // What writes do to the cache, and how misses backfill. Null: WriteThenDelete.
    std::shared_ptr<const WriteStrategy> strategy;

    // Distributed lock per key (lock_mode.h). Mutex and ReadWrite need `lock_service`.
    LockMode lock_mode = LockMode::None;
    // Makes the per-key locks, whatever the backend (locks/lock_service.h: Redis, fair Redis,
    // MySQL, ZooKeeper, in-memory). Borrowed; must outlive the repository. ReadWrite needs a
    // backend with read-write locks (ConfigError otherwise). With a RedisLockClient at hand,
    // `RedisLockService service(client);` is one (locks/redis_lock_service.h).
    LockService* lock_service = nullptr;
    // How long a read or write waits for the key's lock. A read that times out reads the
    // database without filling; a write throws TimeoutError (RetryCall).
    std::chrono::milliseconds lock_wait{std::chrono::seconds(5)};
    // Lease of each lock hold (renewed by the lock client's watchdog while held).
    std::chrono::milliseconds lock_lease{std::chrono::seconds(30)};

    // Namespace of every key: `<key_prefix>{<entity>:<id>}`. No '{' or '}' (ConfigError).
    std::string key_prefix = "ls:";
    // TTL of a cached value, plus a uniform random extra in [0, ttl_jitter] so that entries
    // filled together do not expire together.
    std::chrono::milliseconds ttl{std::chrono::minutes(10)};
    std::chrono::milliseconds ttl_jitter{std::chrono::minutes(1)};
    // TTL of a cached "not found" (C7). 0 disables negative caching.
    std::chrono::milliseconds negative_ttl{std::chrono::seconds(30)};

    // One loader per key across processes (C6): the first reader to miss puts a marker in the
    // key; the others poll (1 ms doubling to 25 ms) for the value for at most `guard_wait`, then
    // read the database without filling. Under Lease the marker is always taken (it is the
    // lease); turning the guard off then only stops readers from waiting for it.
    bool stampede_guard = true;
    std::chrono::milliseconds guard_wait{std::chrono::seconds(1)};
    // Lifetime of a marker: longer than the slowest database read, or that read's fill is
    // refused under Lease (and its waiters give up on it).
    std::chrono::milliseconds marker_ttl{std::chrono::seconds(3)};

    // Stale-while-revalidate (docs/cache.md): a value entry lives `max_stale` past its TTL. In
    // that window it is stale: the first reader refills it (one per key across processes, its
    // fill lands only if the key still holds the stale entry it saw), and every other reader
    // gets the stale value at once, marked `Versioned::stale` (counted as `stale_served`).
    // Only TTL expiry makes a value stale: every write deletes its key (or replaces it with the
    // newer version), so a value invalidated by a write is never served (C2, C11 stay closed).
    // Past `max_stale` the entry is gone and reads miss as usual. Needs the Redis entry store
    // (the in-memory store cannot tell a stale entry: the option has no effect there) and no
    // near cache (ConfigError). 0: off.
    std::chrono::milliseconds max_stale{0};

    // Failed deletes are retried with exponential backoff from `delete_retry_initial` up to
    // `delete_retry_max` between attempts, until they succeed or the longest TTL an entry can
    // have has passed (the stale entry has expired by then).
    std::chrono::milliseconds delete_retry_initial{50};
    std::chrono::milliseconds delete_retry_max{std::chrono::seconds(2)};
    // After a connection error, reads skip the cache (straight to the database, no fill) for
    // this long instead of paying a failing round trip each. 0: always try the cache.
    std::chrono::milliseconds cache_retry_after{500};

    // Runs delayed and retried deletes. Null: the repository starts its own thread.
    std::shared_ptr<BackgroundScheduler> scheduler;

    // Transactional outbox (outbox.h, C5): every write records its key in the write's own
    // transaction; a writer that dies between COMMIT and its cache operation is replayed by any
    // process's Outbox after `OutboxOptions::bound`. Null: no outbox.
    std::shared_ptr<Outbox> outbox;

    // Read replica (C10, docs/invalidation.md): misses load from this pool (a MariaDB replica of
    // the repository's database) instead of the primary, except a key written by this library
    // within `recent_write_window`: every write marks its key (`<key>:recent`, same hash tag)
    // before COMMIT, and a miss of a marked key loads from the primary (memcache's remote
    // markers). Writes always go to the primary. Borrowed; must outlive the repository. Null:
    // every read from the primary. The window must exceed the replica's lag; 0 sends every
    // miss to the replica (unprotected: C10 open).
    MysqlPool* read_replica = nullptr;
    std::chrono::milliseconds recent_write_window{std::chrono::seconds(10)};

    // Near cache (docs/near-cache.md, C12): hot entries served from this process's memory, kept
    // in step by Redis CLIENT TRACKING and dropped whole whenever that channel is not known
    // intact. Single-id reads fill it through a tracked GET; batch reads use its hits. This
    // process's writes drop their keys from it when they return. Needs the repository's store to
    // be the same standalone Redis the near cache tracks. Null: none.
    std::shared_ptr<RedisNearCache> near_cache;
};

}  // namespace lockstep
