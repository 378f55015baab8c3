// Which server a miss loads from when a repository has a read replica (C10, docs/invalidation.md).
//
// C10: W commits v2 on the primary and deletes the key; R misses, reads a replica that has not
// applied v2 yet, and backfills v1, which the cache then serves until its TTL. Replica lag turns
// that from a rare interleaving into the normal case right after every write.
//
// What closes it here is memcache's "remote marker": every write puts a short-lived marker
// `<value key>:recent` (same hash tag) with TTL `recent_write_window` BEFORE its COMMIT, and a
// miss of a key that has one loads from the primary. Why before COMMIT: a reader that looks for
// the marker after the commit is then sure to see it; a reader that looked before cannot have
// missed a newer row on the replica that the primary had (the primary had none yet), and its
// fill races the writer's DEL exactly like C2 on the primary, which the versioned strategies
// (Lease, WriteThrough: IfMarker fills, refused once the write's DEL removed the reader's
// marker) already close. What it does not cover: a replica lagging longer than the window, and
// writes that bypass the library (C9); for those, follow the replica's own binlog with a
// BinlogInvalidator (docs/invalidation.md).
//
// A marker that cannot be set (Redis down) is counted and logged; the write goes on (the cache
// never fails a write). A marker that cannot be read sends the miss to the primary.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace lockstep {
class EntryStore;
class MysqlPool;
}  // namespace lockstep

namespace lockstep::detail {

class ReplicaReads {
public:
    // `replica` null: every load goes to `primary` and nothing is marked. `window` 0: loads go to
    // the replica even right after a write (the unprotected C10 shape, for the demo and tests).
    ReplicaReads(MysqlPool& primary, MysqlPool* replica, std::chrono::milliseconds window, EntryStore& store);

    bool enabled() const noexcept { return replica_ != nullptr; }

    // Before the COMMIT of a write of `key`.
    void mark_written(const std::string& key);
    // The pool a miss of `key` (of every key in `keys`) loads from.
    MysqlPool& pool_for(const std::string& key);
    MysqlPool& pool_for(const std::vector<std::string>& keys);

    static std::string marker_key(const std::string& key) { return key + ":recent"; }

    std::uint64_t replica_loads() const noexcept { return replica_loads_.load(std::memory_order_relaxed); }
    std::uint64_t primary_loads() const noexcept { return primary_loads_.load(std::memory_order_relaxed); }
    std::uint64_t marks_failed() const noexcept { return marks_failed_.load(std::memory_order_relaxed); }

private:
    MysqlPool& to_primary();

    MysqlPool& primary_;
    MysqlPool* replica_;
    std::chrono::milliseconds window_;
    EntryStore& store_;
    std::atomic<std::uint64_t> replica_loads_{0}, primary_loads_{0}, marks_failed_{0};
};

}  // namespace lockstep::detail
