// EntryStore: the cache operations a CachedRepository needs, each atomic on one key. Over Redis
// (make_redis_entry_store) the conditional ones are one Lua script each (strategies/src/
// entry_scripts.cpp); over any Cache (make_cache_entry_store, e.g. the in-memory fake for fast
// unit tests) they are emulated under a process-local mutex, which is atomic only for callers
// going through that one store.
//
// Every operation touches exactly one key (the batch forms are pipelines of single-key
// commands), or one key and its companion keys of the same hash tag (refill), so every script
// is legal on Redis Cluster whatever the keys are.
//
// Errors: what the backend throws (ConnectionError when Redis is down, ProtocolError on an error
// reply); the repository decides what a failure means.
// Thread safety: implementations are safe to call from many threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lockstep {

class Cache;
class RedisClient;

// How a backfill (or a write-through set) lands.
enum class FillMode {
    // SET: overwrites whatever is there (markers included).
    Always,
    // A writer's set after COMMIT, `version` being the version it committed. Replaces only a
    // value with an older version (C1). Same version: unchanged. Anything else is deleted: a
    // higher version (a newer write landed first, or versions went backwards, C11), a marker (a
    // reader's load may predate the commit), a not-found, garbage. An empty key stays empty
    // (B2: the newer entry may have been evicted; only a reader's marker proves freshness).
    IfNewer,
    // Only if the key still holds the caller's own marker: no write and no eviction touched
    // the key since the caller's miss, so its load is the newest committed version (C2, C4,
    // B2, C11). How every versioned strategy (Lease, WriteThrough) backfills.
    IfMarker,
};

enum class FillOutcome {
    Stored,
    // Refused because the cache holds something newer, or the caller's marker is gone: the
    // value the caller read may be stale. Counted as `stale_sets_refused`.
    Refused,
    // IfNewer with the same version already cached: nothing to do.
    Unchanged,
    // IfNewer found no older value to refresh: the key is now empty (it was, or what it held
    // was deleted); the next reader loads and fills it.
    Cleared,
};

struct Fill {
    std::string key;
    std::string entry;  // encoded CacheEntry (a value or a not-found)
    std::chrono::milliseconds ttl{0};
    FillMode mode = FillMode::Always;
    // IfNewer: the version of `entry`; std::nullopt for a not-found entry.
    std::optional<std::int64_t> version;
    // IfMarker: the caller's marker entry ("L:<token>").
    std::string marker;
};

// What a claim found.
struct Claim {
    enum class Result {
        // The key was empty; it now holds the caller's marker: the caller loads.
        Claimed,
        // Another caller's marker is there: someone else is loading.
        Busy,
        // Something other than a marker is there (usually a value that landed meanwhile).
        Present,
    };
    Result result = Result::Claimed;
    std::string entry;  // Present: what is there
};

// An entry and how long it has left to live (EntryStore::get_timed).
struct TimedEntry {
    std::string entry;
    // Remaining TTL; negative when the store cannot tell (or the key has none).
    std::chrono::milliseconds ttl_left{-1};
};

// The companion key of `key` that holds the marker of its stale-while-revalidate refill:
// `<key>:refill`, same hash tag.
std::string refill_key_of(const std::string& key);

// A DEL sent and not answered yet (EntryStore::start_remove).
class PendingRemove {
public:
    virtual ~PendingRemove() = default;
    // Waits for the DEL's reply; throws what remove() would. Call at most once.
    virtual void finish() = 0;
};

class EntryStore {
public:
    virtual ~EntryStore() = default;

    // Sends the DEL of `key` and returns before its reply, so that the caller overlaps the
    // round trip with its own work; finish() collects it (DelayedDoubleDelete's first
    // delete beside the UPDATE). Dropping it unfinished is allowed (the DEL may or may not have
    // run). Default: the delete runs in finish(), as remove({key}).
    virtual std::unique_ptr<PendingRemove> start_remove(const std::string& key) {
        struct Deferred final : PendingRemove {
            Deferred(EntryStore& s, std::string k) : store(s), key(std::move(k)) {}
            void finish() override { store.remove({key}); }
            EntryStore& store;
            std::string key;
        };
        return std::make_unique<Deferred>(*this, key);
    }

    virtual std::optional<std::string> get(const std::string& key) = 0;
    // One round trip; one result per key, in order.
    virtual std::vector<std::optional<std::string>> get_many(const std::vector<std::string>& keys) = 0;

    // If `key` is empty, sets it to `marker` with `ttl` (one atomic step).
    virtual Claim claim(const std::string& key, const std::string& marker, std::chrono::milliseconds ttl) = 0;
    virtual std::vector<Claim> claim_many(const std::vector<std::string>& keys,
                                          const std::vector<std::string>& markers,
                                          std::chrono::milliseconds ttl) = 0;

    virtual FillOutcome fill(const Fill& fill) = 0;
    virtual std::vector<FillOutcome> fill_many(const std::vector<Fill>& fills) = 0;

    // Deletes `key` only if it still holds exactly `expected` (a marker being given back, an
    // entry that did not decode). True if it deleted.
    virtual bool remove_if_equals(const std::string& key, const std::string& expected) = 0;

    // ---- stale-while-revalidate (RepositoryOptions::max_stale) ----
    // The entry and its remaining TTL (one round trip). Default: get(), TTL unknown, so that no
    // entry ever looks stale (a store without TTLs serves no stale values).
    virtual std::optional<TimedEntry> get_timed(const std::string& key) {
        auto e = get(key);
        if (!e) return std::nullopt;
        return TimedEntry{std::move(*e), std::chrono::milliseconds(-1)};
    }
    virtual std::vector<std::optional<TimedEntry>> get_many_timed(const std::vector<std::string>& keys) {
        std::vector<std::optional<TimedEntry>> out;
        for (auto& e : get_many(keys)) {
            if (e) {
                out.push_back(TimedEntry{std::move(*e), std::chrono::milliseconds(-1)});
            } else {
                out.emplace_back();
            }
        }
        return out;
    }
    // Puts `marker` in refill_key_of(key) with `ttl` if no refill marker is there: true when the
    // caller is now the one refilling `key`. Default: false.
    virtual bool claim_refill(const std::string& /*key*/, const std::string& /*marker*/,
                              std::chrono::milliseconds /*ttl*/) {
        return false;
    }
    // Sets `key` to `entry` with `ttl` only if it still holds exactly `expected` (the stale entry
    // the refill started from: a write since then deleted or replaced it, and the refill's read
    // may predate that write, C2), then gives back the caller's refill `marker` (one atomic
    // step). Stored or Refused. Default: Refused.
    virtual FillOutcome refill(const std::string& /*key*/, const std::string& /*expected*/, const std::string& /*entry*/,
                               std::chrono::milliseconds /*ttl*/, const std::string& /*marker*/) {
        return FillOutcome::Refused;
    }
    // Deletes every key (one round trip; one DEL per key, cluster-legal).
    virtual void remove(const std::vector<std::string>& keys) = 0;
};

// Over Redis: GET / SET / DEL and one Lua script per conditional operation. `client` is
// borrowed and must outlive the store.
std::shared_ptr<EntryStore> make_redis_entry_store(RedisClient& client);

// Over any Cache, conditional operations emulated under a mutex of this store. For unit tests
// and single-process use; `cache` is borrowed and must outlive the store.
std::shared_ptr<EntryStore> make_cache_entry_store(Cache& cache);

}  // namespace lockstep
