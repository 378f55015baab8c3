// RepositoryMetrics: counters of one CachedRepository since it was created, as a snapshot.
// Monotonic except the gauges (`deletes_pending`). Every metric is listed once, in
// repository_metrics.def.
//
// Thread safety: plain values; a snapshot is a copy, taken by RepositoryCore::metrics().
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "lockstep/core/latency_histogram.h"

namespace lockstep {

// Latency histograms of one repository (core/latency_histogram.h: power-of-two µs buckets), one
// field per LOCKSTEP_HISTOGRAM of repository_metrics.def (each described there).
struct RepositoryLatencies {
#define LOCKSTEP_HISTOGRAM(name, help) HistogramSnapshot name;
#include "lockstep/strategies/repository_metrics.def"
};

// The one metrics snapshot of a repository: one field per counter and gauge of
// repository_metrics.def (each described there), and the latencies.
struct RepositoryMetrics {
#define LOCKSTEP_COUNTER(name, help) std::uint64_t name = 0;
#include "lockstep/strategies/repository_metrics.def"

    RepositoryLatencies latency;
};

// One line, "hits=3 misses=1 ...", for logs and test failures: every counter and gauge of
// for_each_metric, in its order.
std::string to_string(const RepositoryMetrics& m);
// One line per histogram, "hit: count=3 mean=120us p50=128us p99=256us max<=256us".
std::string latency_report(const RepositoryMetrics& m);

enum class MetricKind { Counter, Gauge };
// Whether the counter or gauge `name` of for_each_metric only grows (Counter) or is a level
// (Gauge). Counter for a name that is not a metric.
MetricKind metric_kind(std::string_view name) noexcept;

// Calls `fn(name, help, value)` for every counter and gauge, and `hist(name, help, snapshot)`
// for every histogram, in the order of repository_metrics.def: one list for every exporter
// (Prometheus, logs, JSON).
template <class CounterFn, class HistogramFn>
void for_each_metric(const RepositoryMetrics& m, CounterFn&& fn, HistogramFn&& hist) {
#define LOCKSTEP_COUNTER(name, help) fn(#name, help, m.name);
#define LOCKSTEP_HISTOGRAM(name, help) hist(#name, help, m.latency.name);
#include "lockstep/strategies/repository_metrics.def"
}

}  // namespace lockstep
