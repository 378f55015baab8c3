// WriteThenDelete: commit, then DEL the key (cache-aside, the usual default).
//
// Closes C1 (nothing is ever set by a writer) and C3 (the delete follows the commit). Leaves C2
// open: a reader that read the old row before the commit and backfills after the DEL leaves a
// stale entry until its TTL. Close that with lock mode Mutex/ReadWrite or the Lease strategy.
// Cost: one DEL per write.
#pragma once

#include "lockstep/strategies/write_strategy.h"

namespace lockstep {

class WriteThenDelete final : public WriteStrategy {
public:
    std::string name() const override { return "WriteThenDelete"; }
    void after_commit(WriteContext& write) const override { write.delete_now(); }
};

}  // namespace lockstep
