// TtlBounding{max_ttl, jitter}: commit, then DEL, and no entry outlives `max_ttl`.
//
// It does not close C2 or C4; it bounds them: whatever stale entry a race leaves behind is gone
// within `max_ttl`. Every entry's TTL (values, "not found" entries) is capped at
// `max_ttl - uniform(0, jitter)`, so entries filled together do not all expire together.
// Cost: more misses (entries live at most max_ttl), one DEL per write.
#pragma once

#include <chrono>
#include <string>

#include "lockstep/strategies/write_strategy.h"

namespace lockstep {

class TtlBounding final : public WriteStrategy {
public:
    // REQUIRES: max_ttl > 0, 0 <= jitter < max_ttl (ConfigError).
    TtlBounding(std::chrono::milliseconds max_ttl, std::chrono::milliseconds jitter = std::chrono::milliseconds(0));

    std::string name() const override;
    void after_commit(WriteContext& write) const override { write.delete_now(); }
    std::chrono::milliseconds entry_ttl(std::chrono::milliseconds requested) const override;

    std::chrono::milliseconds max_ttl() const noexcept { return max_ttl_; }
    std::chrono::milliseconds jitter() const noexcept { return jitter_; }

private:
    std::chrono::milliseconds max_ttl_;
    std::chrono::milliseconds jitter_;
};

}  // namespace lockstep
