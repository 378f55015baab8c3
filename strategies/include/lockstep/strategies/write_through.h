// WriteThrough: commit, then refresh the cached value with the new one if the cached version
// is older (one Lua script, FillMode::IfNewer). Read misses backfill like Lease: only while the
// key still holds the reader's own marker (FillMode::IfMarker).
//
// Closes C1: two writers' sets can land in any order, the newer version wins. C2 and C4: the
// writer's set deletes a reader's marker, so a backfill that may predate the commit is refused.
// B2: a writer's set never lands on an empty key (the newer entry may have been evicted) and a
// reader's fill needs its marker, which an eviction takes with it: no fill stores a version
// older than the newest committed one. C11: versions never go backwards (the repository writes
// max(version + 1, database clock in microseconds)), and a set that finds a higher version
// deletes it, so an entry the database contradicts never outlives the next write.
// A set that fails (Redis down) queues a delete instead: the window of C5 until it lands.
// Fault point: "repo.before_cache_set".
// Cost: one more statement inside the write transaction (the written row is re-read so the
// cached bytes are exactly what a reader would load), one script per write, and a claim script
// per miss (the marker).
#pragma once

#include "lockstep/core/fault_point.h"
#include "lockstep/strategies/write_strategy.h"

namespace lockstep {

class WriteThrough final : public WriteStrategy {
public:
    std::string name() const override { return "WriteThrough"; }
    void after_commit(WriteContext& write) const override {
        if (write.kind() == WriteContext::Kind::Remove) {
            write.delete_now();
            return;
        }
        fault::point("repo.before_cache_set");
        write.set_if_newer();
    }
    FillMode fill_mode() const noexcept override { return FillMode::IfMarker; }
    bool needs_entry() const noexcept override { return true; }
};

}  // namespace lockstep
