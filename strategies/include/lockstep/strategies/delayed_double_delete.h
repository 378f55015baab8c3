// DelayedDoubleDelete{delay}: DEL, commit, DEL, and one more DEL `delay` later on the
// repository's background scheduler. The writer never sleeps.
//
// Closes C3 (the second delete follows the commit) and narrows C2: a stale backfill is removed
// by the delayed delete, if the backfill lands before it. A read slower than `delay` still
// leaves a stale entry (C4): choose `delay` above the slowest read you expect (p99.9 of a miss:
// DB read + backfill), and remember it is a bet, not a proof. Lease closes C4 for any delay.
// Fault points: "repo.between_deletes" (after the post-commit delete, before the delayed one is
// scheduled) and "repo.before_delayed_delete" (on the scheduler thread, before each batch of last DELs).
// Cost: three DELs per write; the delayed ones of all keys due within a short slack (a tenth of
// `delay`, at most 10 ms, never early) go out in one pipeline per scheduler wake-up.
#pragma once

#include <chrono>
#include <string>

#include "lockstep/core/error.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/strategies/write_strategy.h"

namespace lockstep {

class DelayedDoubleDelete final : public WriteStrategy {
public:
    // REQUIRES: delay > 0 (ConfigError).
    explicit DelayedDoubleDelete(std::chrono::milliseconds delay) : delay_(delay) {
        if (delay.count() <= 0) throw ConfigError("DelayedDoubleDelete.delay", "must be positive");
    }

    std::string name() const override { return "DelayedDoubleDelete(" + std::to_string(delay_.count()) + "ms)"; }
    // The first DEL. An update sends it as soon as the row is locked and this collects its reply
    // (deletes_before_commit): the writer does not wait one more Redis round trip for it.
    void before_commit(WriteContext& write) const override { write.delete_now(); }
    bool deletes_before_commit() const noexcept override { return true; }
    void after_commit(WriteContext& write) const override {
        write.delete_now();
        fault::point("repo.between_deletes");
        write.delete_after(delay_);
    }

    std::chrono::milliseconds delay() const noexcept { return delay_; }

private:
    std::chrono::milliseconds delay_;
};

}  // namespace lockstep
