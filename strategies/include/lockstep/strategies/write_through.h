// WriteThrough: commit, then set the new value in the cache only if the cached version is older
// (one Lua script, FillMode::IfNewer). Read misses backfill with the same version check.
//
// Closes C1: two writers' sets can land in any order, the newer version wins. Because a
// backfill also refuses to replace a newer version, it closes C2 and C4 for updates as long as
// the writer's set lands (if it fails, a delete is queued instead, and the window of C5 opens
// until it lands). A remove deletes the key; a reader that read the row before the remove and
// backfills after the delete is not refused (no version to compare with): that case stays open.
// Fault point: "repo.before_cache_set".
// Cost: one more statement inside the write transaction (the written row is re-read so the
// cached bytes are exactly what a reader would load), and one script per write.
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
    FillMode fill_mode() const noexcept override { return FillMode::IfNewer; }
    bool needs_entry() const noexcept override { return true; }
};

}  // namespace lockstep
