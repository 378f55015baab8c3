// NearCache: a bounded, in-process copy of hot cache entries, kept in front of the Redis entry
// store so that a hit costs no round trip. It is only the local store; what keeps it correct is
// the invalidation channel that feeds it (redis_invalidation_channel.h) and the rules below
// (docs/near-cache.md, race C12 in docs/races.md).
//
// Rules it enforces:
//   - Bounded by `max_entries` and `max_bytes` (key + entry bytes + a fixed per-entry overhead).
//     Eviction is LRU: O(1) per operation under one mutex, and the entries a near cache exists
//     for (a few very hot keys) are exactly the ones LRU keeps. A frequency-aware policy
//     (W-TinyLFU) resists scans better, but a near cache is filled only by single reads of an
//     entity, not by scans, and every invalidation removes entries anyway.
//   - Every entry carries its entity version; a fill never replaces a newer local version.
//   - Every entry has a local TTL: the last bound if every other rule failed.
//   - drop() empties it and starts a new epoch. A fill carries the ticket taken before its
//     Redis read (begin_fill); it lands only if no drop happened since (same epoch) and no
//     invalidation of its key arrived since (its pending mark is still there). So no entry comes
//     from a read that started before the last drop or before the last invalidation of its key
//     (C12).
//
// `drop_rule = false` (tests and the demo only) reopens C12: drops keep the entries and fills
// ignore the epoch, so an invalidation lost while the channel was down leaves a stale entry until
// its local TTL.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "lockstep/core/mutex.h"

namespace lockstep {

struct NearCacheOptions {
    // At most this many entries; the least recently used goes first.
    std::size_t max_entries = 10000;
    // At most this many bytes (keys, entry bytes and kEntryOverhead per entry).
    std::size_t max_bytes = 64u << 20;
    // Local lifetime of an entry, whatever Redis says: bounds the damage of any invalidation
    // this process could not know it missed.
    std::chrono::milliseconds ttl{std::chrono::seconds(30)};
    // Tests and the demo only: false disables the drop rule (C12 reopened, see above).
    bool drop_rule = true;
};

// Counters since construction; entries and bytes are levels.
struct NearCacheStats {
    std::uint64_t hits = 0;           // get() answered locally
    std::uint64_t misses = 0;         // get() that found nothing usable
    std::uint64_t drops = 0;          // whole-cache drops (channel not known intact)
    std::uint64_t invalidations = 0;  // keys invalidated (from Redis or by this process's writes)
    std::uint64_t fills = 0;          // entries stored
    std::uint64_t fills_refused = 0;  // fills refused: a drop or an invalidation since their read
    std::uint64_t evictions = 0;      // entries evicted by the bounds
    std::uint64_t entries = 0;
    std::uint64_t bytes = 0;
};

class NearCache {
    using Clock = std::chrono::steady_clock;

public:
    // Bookkeeping bytes counted per entry on top of key and value (list node, map node, fields).
    static constexpr std::size_t kEntryOverhead = 160;

    // What a read must show to fill: taken before the Redis read.
    struct Ticket {
        std::uint64_t epoch = 0;
        std::uint64_t mark = 0;
    };

    struct Entry {
        std::int64_t version = 0;
        std::string bytes;
    };

    // ConfigError when a bound is 0 or the TTL is not positive.
    explicit NearCache(NearCacheOptions options = {});
    NearCache(const NearCache&) = delete;
    NearCache& operator=(const NearCache&) = delete;

    // The entry of `key`, if present and not past its local TTL (a copy).
    std::optional<Entry> get(std::string_view key) EXCLUDES(mutex_);
    // Calls `use(version, bytes)` with the entry of `key`, if present and not past its local
    // TTL, under the cache's mutex (no copy: what a hit of the repository does). `use` must be
    // quick and must not call this cache; an exception from it propagates. False: no entry.
    template <class Use>
    bool visit(std::string_view key, Use&& use) EXCLUDES(mutex_) {
        const auto now = Clock::now();
        MutexLock lock(mutex_);
        const Node* node = find_fresh(key, now);
        if (node == nullptr) return false;
        use(node->entry.version, std::string_view(node->entry.bytes));
        return true;
    }

    // The entry of `key`, if present and not past its local TTL (a copy), for an observer (the
    // consistency inspector): not counted as a hit or a miss, the LRU order left alone.
    std::optional<Entry> peek(std::string_view key) const EXCLUDES(mutex_);

    // Before the Redis read whose result may fill `key`.
    Ticket begin_fill(const std::string& key) EXCLUDES(mutex_);
    // Stores `bytes` at `version` if the ticket is still good (see the rules above). Fires the
    // fault point "near.before_fill" first. True if stored.
    bool fill(const std::string& key, const Ticket& ticket, std::int64_t version, std::string bytes)
        EXCLUDES(mutex_);

    // `key` changed: forget it, and refuse fills whose read started before now.
    void invalidate(std::string_view key) EXCLUDES(mutex_);
    // The invalidation channel is not known intact: forget everything, new epoch. `reason` is
    // logged. With drop_rule off, only counted.
    void drop(std::string_view reason) EXCLUDES(mutex_);

    NearCacheStats stats() const EXCLUDES(mutex_);
    const NearCacheOptions& options() const noexcept { return options_; }

private:
    struct Node {
        std::string key;
        Entry entry;
        Clock::time_point expires;
        std::size_t size = 0;
    };
    using Lru = std::list<Node>;  // front: most recently used

    // The node of `key` made most recently used and counted as a hit; nullptr (counted as a
    // miss) when absent or past its TTL (then erased).
    const Node* find_fresh(std::string_view key, Clock::time_point now) REQUIRES(mutex_);
    void erase(Lru::iterator it) REQUIRES(mutex_);
    void evict_to_bounds() REQUIRES(mutex_);

    const NearCacheOptions options_;
    mutable Mutex mutex_;
    Lru lru_ GUARDED_BY(mutex_);
    std::unordered_map<std::string_view, Lru::iterator> index_ GUARDED_BY(mutex_);  // views into Node::key
    // Keys with a read in flight, and the mark of the newest begin_fill of each.
    std::unordered_map<std::string, std::uint64_t> pending_ GUARDED_BY(mutex_);
    std::uint64_t epoch_ GUARDED_BY(mutex_) = 0;
    std::uint64_t next_mark_ GUARDED_BY(mutex_) = 0;
    std::size_t bytes_ GUARDED_BY(mutex_) = 0;
    NearCacheStats counters_ GUARDED_BY(mutex_);
};

}  // namespace lockstep
