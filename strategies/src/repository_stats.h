// The counters and latency histograms of one repository: every component counts into them, and
// metrics() reads them as one RepositoryMetrics snapshot. Both lists are generated from
// repository_metrics.def, so a new metric is one line there.
//
// Thread safety: every member may be used from any thread (relaxed atomics; LatencyHistogram is
// thread-safe).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "lockstep/core/latency_histogram.h"
#include "lockstep/strategies/entry_store.h"
#include "lockstep/strategies/repository_metrics.h"

namespace lockstep::detail {

using Clock = std::chrono::steady_clock;

// One atomic per LOCKSTEP_COUNTER of repository_metrics.def.
struct Counters {
#define LOCKSTEP_COUNTER(name, help) std::atomic<std::uint64_t> name{0};
#define LOCKSTEP_GAUGE(name, help)
#define LOCKSTEP_REPLICA_COUNTER(name, help)
#define LOCKSTEP_NEAR_COUNTER(name, help)
#define LOCKSTEP_NEAR_GAUGE(name, help)
#include "lockstep/strategies/repository_metrics.def"
};

inline void bump(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }

// One histogram per LOCKSTEP_HISTOGRAM of repository_metrics.def.
struct Latencies {
#define LOCKSTEP_HISTOGRAM(name, help) LatencyHistogram name;
#include "lockstep/strategies/repository_metrics.def"
};

struct RepositoryStats {
    Counters c;
    Latencies lat;

    // A fill or write-through set, counted by what the cache did with it.
    void count_fill(FillOutcome outcome);
    // The counters and histograms kept here. The gauges and the replica's counters are left at 0
    // for their owners (DeleteQueue, ReplicaReads) to fill in.
    RepositoryMetrics snapshot() const;
};

}  // namespace lockstep::detail
