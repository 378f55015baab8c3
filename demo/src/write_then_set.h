// WriteThenSet: DEMO ONLY. Deliberately broken, kept so the demo and the test matrix can show
// race C1 open. Do not use it for real data.
//
// After COMMIT it SETs the new value unconditionally. Two writers that commit in one order and
// set in the other leave the older value in the cache until its TTL (C1). A reader's backfill
// is unconditional too, so C2 stays open as well. Use WriteThrough (versioned set) instead.
#pragma once

#include "lockstep/strategies/write_strategy.h"

namespace lockstep {

class WriteThenSet final : public WriteStrategy {
public:
    std::string name() const override { return "WriteThenSet(demo-only)"; }
    void after_commit(WriteContext& write) const override {
        if (write.kind() == WriteContext::Kind::Remove) {
            write.delete_now();
            return;
        }
        write.set_unconditionally();
    }
    bool needs_entry() const noexcept override { return true; }
};

}  // namespace lockstep
