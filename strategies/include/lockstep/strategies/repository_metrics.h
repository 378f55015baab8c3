// RepositoryMetrics: counters of one CachedRepository since it was created, as a snapshot.
// Monotonic except `deletes_pending`, which is a gauge.
#pragma once

#include <cstdint>
#include <string>

namespace lockstep {

struct RepositoryMetrics {
    // Reads answered from a cached value.
    std::uint64_t hits = 0;
    // Reads answered from a cached "not found" (C7).
    std::uint64_t negative_hits = 0;
    // Reads that found no usable entry.
    std::uint64_t misses = 0;
    // Rows (or absent rows) read from the database by the read path: one per id loaded.
    std::uint64_t loads = 0;
    // Backfills stored.
    std::uint64_t fills = 0;
    // Backfills and write-through sets refused because the value they carried may be stale
    // (a newer version cached, or the reader's lease marker destroyed by a write).
    std::uint64_t stale_sets_refused = 0;
    // Reads that waited for another reader's load (stampede guard, C6), and of those the ones
    // that gave up after `guard_wait` and read the database without filling.
    std::uint64_t guard_waits = 0;
    std::uint64_t guard_timeouts = 0;
    // Entries that did not decode (envelope or payload): treated as misses and deleted.
    std::uint64_t decode_errors = 0;
    // Cache operations that failed (Redis down, error reply), and reads that were served from
    // the database because of such a failure.
    std::uint64_t cache_errors = 0;
    std::uint64_t degraded_reads = 0;
    // Deletes by writers (immediate and delayed) that reached the cache.
    std::uint64_t deletes = 0;
    // Delete attempts that failed; retries made; keys given up on (their entries have expired
    // by then: the queue stops after the longest TTL an entry can have); keys waiting now.
    std::uint64_t deletes_failed = 0;
    std::uint64_t deletes_retried = 0;
    std::uint64_t deletes_abandoned = 0;
    std::uint64_t deletes_pending = 0;
    // Lock acquisitions that had to wait; that gave up after `lock_wait`; holds found lost.
    std::uint64_t lock_waits = 0;
    std::uint64_t lock_timeouts = 0;
    std::uint64_t locks_lost = 0;
};

// One line, "hits=3 misses=1 ...", for logs and test failures.
std::string to_string(const RepositoryMetrics& m);

}  // namespace lockstep
