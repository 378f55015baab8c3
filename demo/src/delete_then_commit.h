// DeleteThenCommit: DEMO ONLY. Deliberately broken, kept so the demo and the test matrix can
// show race C3 open. Do not use it for real data.
//
// It deletes the key inside the transaction, before COMMIT, and never after. Between the delete
// and the commit a reader misses, reads the old committed row, and backfills it: the cache then
// holds the old value until its TTL, although the write succeeded (C3). Use WriteThenDelete.
#pragma once

#include "lockstep/strategies/write_strategy.h"

namespace lockstep {

class DeleteThenCommit final : public WriteStrategy {
public:
    std::string name() const override { return "DeleteThenCommit(demo-only)"; }
    void before_commit(WriteContext& write) const override { write.delete_now(); }
    void after_commit(WriteContext&) const override {}
};

}  // namespace lockstep
