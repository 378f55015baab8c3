// RepositoryStats: the counting that is not a plain bump, and the snapshot.
#include "repository_stats.h"

namespace lockstep::detail {

void RepositoryStats::count_fill(FillOutcome outcome) {
    switch (outcome) {
        case FillOutcome::Stored: bump(c.fills); break;
        case FillOutcome::Refused: bump(c.stale_sets_refused); break;
        case FillOutcome::Unchanged:
        case FillOutcome::Cleared: break;
    }
}

RepositoryMetrics RepositoryStats::snapshot() const {
    RepositoryMetrics m;
#define LOCKSTEP_COUNTER(name, help) m.name = c.name.load(std::memory_order_relaxed);
#define LOCKSTEP_GAUGE(name, help)
#define LOCKSTEP_REPLICA_COUNTER(name, help)
#define LOCKSTEP_NEAR_COUNTER(name, help)
#define LOCKSTEP_NEAR_GAUGE(name, help)
#define LOCKSTEP_HISTOGRAM(name, help) m.latency.name = lat.name.snapshot();
#include "lockstep/strategies/repository_metrics.def"
    return m;
}

}  // namespace lockstep::detail
