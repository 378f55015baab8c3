// PrometheusCollector: the metrics of CachedRepository and RedisLockClient instances in
// Prometheus' model, for
// prometheus-cpp (an optional component: target lockstep::prometheus, built when prometheus-cpp
// is found; the core library does not depend on it).
//
//   auto collector = std::make_shared<lockstep::PrometheusCollector>();
//   collector->add_repository("product", [&] { return products.metrics(); });
//   collector->add_lock_client("orders", [&] { return lock_client.stats(); });
//   prometheus::Exposer exposer{"127.0.0.1:9464"};          // prometheus-cpp-pull
//   exposer.RegisterCollectable(collector);                   // GET /metrics
//   std::string text = lockstep::prometheus_text(*collector); // or the text exposition directly
//
// Each counter becomes `lockstep_repository_<name>_total{repository="product"}` (the
// deletes_pending gauge `lockstep_repository_deletes_pending`), each latency histogram
// `lockstep_repository_<name>_seconds` with the histogram's power-of-two buckets. A lock client's
// counters become `lockstep_lock_client_<name>_total{lock_client="orders"}`, its two histograms
// `lockstep_lock_client_acquire_latency_seconds` and `lockstep_lock_client_hold_time_seconds`
// (LockClientStats says what each one measures). A binlog follower's metrics become
// `lockstep_invalidator_<name>_total{invalidator="orders"}` and gauges (lag, seconds behind,
// connected); a consistency inspector's `lockstep_inspector_<name>_total{inspector="orders"}` and
// gauges (stale per million, staleness). docs/metrics.md lists every name.
//
// Thread safety: add_repository() and Collect() from any thread; the snapshot functions are
// called from the thread that collects.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include "lockstep/core/mutex.h"
#include "lockstep/invalidation/binlog_invalidator.h"
#include "lockstep/invalidation/consistency_inspector.h"
#include "lockstep/locks/lock_client.h"
#include "lockstep/strategies/repository_metrics.h"

namespace lockstep {

class PrometheusCollector : public prometheus::Collectable {
public:
    // `name` is the value of the `repository` label.
    void add_repository(std::string name, std::function<RepositoryMetrics()> snapshot) EXCLUDES(mutex_);

    // `name` is the value of the `lock_client` label (e.g. the service's name for its locks).
    void add_lock_client(std::string name, std::function<LockClientStats()> snapshot) EXCLUDES(mutex_);

    // `name` is the value of the `invalidator` label (BinlogInvalidator::metrics()).
    void add_invalidator(std::string name, std::function<InvalidatorMetrics()> snapshot) EXCLUDES(mutex_);

    // `name` is the value of the `inspector` label (ConsistencyInspector::metrics()).
    void add_inspector(std::string name, std::function<InspectorMetrics()> snapshot) EXCLUDES(mutex_);

    std::vector<prometheus::MetricFamily> Collect() const override EXCLUDES(mutex_);

private:
    struct Source {
        std::string name;
        std::function<RepositoryMetrics()> snapshot;
    };
    struct LockClientSource {
        std::string name;
        std::function<LockClientStats()> snapshot;
    };
    template <typename Metrics>
    struct NamedSource {
        std::string name;
        std::function<Metrics()> snapshot;
    };
    mutable Mutex mutex_;
    std::vector<Source> sources_ GUARDED_BY(mutex_);
    std::vector<LockClientSource> lock_clients_ GUARDED_BY(mutex_);
    std::vector<NamedSource<InvalidatorMetrics>> invalidators_ GUARDED_BY(mutex_);
    std::vector<NamedSource<InspectorMetrics>> inspectors_ GUARDED_BY(mutex_);
};

// The text exposition format (what GET /metrics returns) of everything `collector` collects.
std::string prometheus_text(const prometheus::Collectable& collector);

}  // namespace lockstep
