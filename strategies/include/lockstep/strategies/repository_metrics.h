// RepositoryMetrics: counters of one CachedRepository since it was created, as a snapshot.
// Monotonic except `deletes_pending`, which is a gauge.
#pragma once

#include <cstdint>
#include <string>

#include "lockstep/core/latency_histogram.h"

namespace lockstep {

// Latency histograms of one repository (core/latency_histogram.h: power-of-two µs buckets).
struct RepositoryLatencies {
    // get() answered from the cache: GET to decoded value.
    HistogramSnapshot hit;
    // get() that missed: the whole miss path (lock, claim, database load, fill, or waiting for
    // another loader).
    HistogramSnapshot miss_load;
    // One backfill or write-through set script (or batch of them).
    HistogramSnapshot fill;
    // insert / update / update_fenced / remove, lock to unlock.
    HistogramSnapshot write;
    // Taking the key's lock (lock modes Mutex and ReadWrite), immediate acquisitions included.
    HistogramSnapshot lock_wait;
    // Holding it, acquisition to release.
    HistogramSnapshot lock_hold;
    // Cache operations that failed: how long they took to fail (a timeout shows here).
    HistogramSnapshot cache_error;
};

// The one metrics snapshot of a repository: counters and latencies.
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
    // With a read replica (RepositoryOptions::read_replica, C10): loads sent to the replica; loads
    // sent to the primary because the key was written recently (or its marker could not be read);
    // writes whose recently-written marker could not be set.
    std::uint64_t replica_loads = 0;
    std::uint64_t primary_loads_recent = 0;
    std::uint64_t recent_marks_failed = 0;

    RepositoryLatencies latency;
};

// One line, "hits=3 misses=1 ...", for logs and test failures (counters only).
std::string to_string(const RepositoryMetrics& m);
// One line per histogram, "hit: count=3 mean=120us p50=128us p99=256us max<=256us".
std::string latency_report(const RepositoryMetrics& m);

// Calls `fn(name, help, value)` for every counter and gauge, and `hist(name, help, snapshot)`
// for every histogram: one list for every exporter (Prometheus, logs, JSON).
template <class CounterFn, class HistogramFn>
void for_each_metric(const RepositoryMetrics& m, CounterFn&& fn, HistogramFn&& hist) {
    fn("hits", "reads answered from a cached value", m.hits);
    fn("negative_hits", "reads answered from a cached not-found", m.negative_hits);
    fn("misses", "reads that found no usable entry", m.misses);
    fn("loads", "rows read from the database by the read path", m.loads);
    fn("fills", "backfills stored", m.fills);
    fn("stale_sets_refused", "backfills and sets refused as possibly stale", m.stale_sets_refused);
    fn("guard_waits", "reads that waited for another loader", m.guard_waits);
    fn("guard_timeouts", "reads that gave up waiting for another loader", m.guard_timeouts);
    fn("decode_errors", "entries that did not decode", m.decode_errors);
    fn("cache_errors", "cache operations that failed", m.cache_errors);
    fn("degraded_reads", "reads served from the database because the cache failed", m.degraded_reads);
    fn("deletes", "deletes that reached the cache", m.deletes);
    fn("deletes_failed", "delete attempts that failed", m.deletes_failed);
    fn("deletes_retried", "delete retries made", m.deletes_retried);
    fn("deletes_abandoned", "keys whose delete was given up", m.deletes_abandoned);
    fn("deletes_pending", "keys waiting for a retried delete (gauge)", m.deletes_pending);
    fn("lock_waits", "lock acquisitions that waited", m.lock_waits);
    fn("lock_timeouts", "lock acquisitions that timed out", m.lock_timeouts);
    fn("locks_lost", "holds found lost", m.locks_lost);
    fn("replica_loads", "loads sent to the read replica", m.replica_loads);
    fn("primary_loads_recent", "loads sent to the primary because the key was written recently", m.primary_loads_recent);
    fn("recent_marks_failed", "writes whose recently-written marker could not be set", m.recent_marks_failed);
    hist("hit", "cache hit latency", m.latency.hit);
    hist("miss_load", "miss path latency (load and fill)", m.latency.miss_load);
    hist("fill", "fill and set script latency", m.latency.fill);
    hist("write", "write latency, lock to unlock", m.latency.write);
    hist("lock_wait", "key lock acquisition latency", m.latency.lock_wait);
    hist("lock_hold", "key lock hold time", m.latency.lock_hold);
    hist("cache_error", "latency of failed cache operations", m.latency.cache_error);
}

}  // namespace lockstep
