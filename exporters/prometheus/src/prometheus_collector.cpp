#include "lockstep/exporters/prometheus_collector.h"

#include <limits>
#include <map>
#include <sstream>

#include <prometheus/text_serializer.h>

namespace lockstep {
namespace {

using Families = std::map<std::string, prometheus::MetricFamily>;
using Labels = std::vector<prometheus::ClientMetric::Label>;

prometheus::MetricFamily& family_of(Families& families, const std::string& full, const char* help,
                                    prometheus::MetricType type) {
    auto& family = families[full];
    family.name = full;
    family.help = help;
    family.type = type;
    return family;
}

void add_scalar(Families& families, const std::string& full, const char* help, bool gauge, std::uint64_t value,
                const Labels& labels) {
    auto& family =
        family_of(families, full, help, gauge ? prometheus::MetricType::Gauge : prometheus::MetricType::Counter);
    prometheus::ClientMetric metric;
    metric.label = labels;
    if (gauge) {
        metric.gauge.value = static_cast<double>(value);
    } else {
        metric.counter.value = static_cast<double>(value);
    }
    family.metric.push_back(std::move(metric));
}

void add_gauge(Families& families, const std::string& full, const char* help, double value, const Labels& labels) {
    auto& family = family_of(families, full, help, prometheus::MetricType::Gauge);
    prometheus::ClientMetric metric;
    metric.label = labels;
    metric.gauge.value = value;
    family.metric.push_back(std::move(metric));
}

// A HistogramSnapshot in seconds: Prometheus' buckets are cumulative, the snapshot's are not;
// the snapshot's last bucket (everything above its largest bound) is the +Inf bucket.
void add_histogram(Families& families, const std::string& full, const char* help, const HistogramSnapshot& h,
                   const Labels& labels) {
    auto& family = family_of(families, full, help, prometheus::MetricType::Histogram);
    prometheus::ClientMetric metric;
    metric.label = labels;
    metric.histogram.sample_count = h.count;
    metric.histogram.sample_sum = static_cast<double>(h.sum_us) / 1e6;
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i + 1 < kHistogramBuckets; ++i) {
        cumulative += h.buckets[i];
        metric.histogram.bucket.push_back({cumulative, static_cast<double>(HistogramSnapshot::upper_bound_us(i)) / 1e6});
    }
    metric.histogram.bucket.push_back({h.count, std::numeric_limits<double>::infinity()});
    family.metric.push_back(std::move(metric));
}

// Every field of LockClientStats (locks/include/lockstep/locks/lock_client.h), in its order.
void add_lock_client_stats(Families& families, const LockClientStats& s, const Labels& labels) {
    const auto counter = [&](const char* name, const char* help, std::uint64_t value) {
        add_scalar(families, "lockstep_lock_client_" + std::string(name) + "_total", help, false, value, labels);
    };
    counter("acquire_attempts", "acquire scripts run (first tries and retries)", s.acquire_attempts);
    counter("acquired", "new acquisitions (not re-entries)", s.acquired);
    counter("wakeups", "waiters woken by a release message or reconnect", s.wakeups);
    counter("renew_batches", "watchdog round trips", s.renew_batches);
    counter("renewals", "holds renewed successfully", s.renewals);
    counter("losses", "holds reported lost", s.losses);
    counter("unlocks_of_lost_holds", "unlock() calls that found the hold lost", s.unlocks_of_lost_holds);
    counter("unlock_errors", "unlock() calls whose release failed", s.unlock_errors);
    counter("gate_waits", "acquisitions that waited at a local gate behind a thread of this client", s.gate_waits);
    add_histogram(families, "lockstep_lock_client_acquire_latency_seconds",
                  "lock()/try_lock call to a new acquisition, the wait included", s.acquire_latency, labels);
    add_histogram(families, "lockstep_lock_client_hold_time_seconds",
                  "new acquisition to its last unlock (released, found lost, or failed)", s.hold_time, labels);
}

// Every numeric field of InvalidatorMetrics (invalidation/binlog_invalidator.h); the GTIDs are
// strings and are not exported.
void add_invalidator_metrics(Families& families, const InvalidatorMetrics& m, const Labels& labels) {
    const auto counter = [&](const char* name, const char* help, std::uint64_t value) {
        add_scalar(families, "lockstep_invalidator_" + std::string(name) + "_total", help, false, value, labels);
    };
    const auto gauge = [&](const char* name, const char* help, double value) {
        add_gauge(families, "lockstep_invalidator_" + std::string(name), help, value, labels);
    };
    counter("events", "binlog events received", m.events);
    counter("transactions", "transactions (event groups) applied", m.transactions);
    counter("rows", "changed rows of watched tables", m.rows);
    counter("keys_deleted", "cache key deletes sent and acknowledged", m.keys_deleted);
    counter("delete_pipelines", "first-delete round trips (retries included)", m.delete_pipelines);
    counter("delete_batches", "groups of transactions whose first deletes shared a pipeline", m.delete_batches);
    counter("second_keys_deleted", "second deletes sent", m.second_keys_deleted);
    counter("second_batches", "pipelined second-delete batches", m.second_batches);
    counter("flushes", "full flushes of one entity", m.flushes);
    counter("flushed_keys", "keys removed by full flushes", m.flushed_keys);
    counter("statement_events", "statement-based events that changed a watched table", m.statement_events);
    counter("reconnects", "binlog connections re-established", m.reconnects);
    counter("heartbeats", "heartbeats received from the primary", m.heartbeats);
    counter("redis_errors", "Redis operations that failed (and were retried)", m.redis_errors);
    counter("positions_lost", "starts whose saved position the primary no longer had", m.positions_lost);
    counter("positions_saved", "positions saved to lockstep_binlog_position", m.positions_saved);
    gauge("second_pending", "groups waiting for their second delete", static_cast<double>(m.second_pending));
    gauge("seconds_behind", "server time of the last applied event to now (0 when caught up)", m.seconds_behind);
    gauge("lag_p50_seconds", "first event of a group received -> its deletes landed, median", m.lag_p50_us / 1e6);
    gauge("lag_p99_seconds", "first event of a group received -> its deletes landed, 99th percentile",
          m.lag_p99_us / 1e6);
    gauge("lag_max_seconds", "first event of a group received -> its deletes landed, maximum", m.lag_max_us / 1e6);
    gauge("last_seek_seconds", "dump request -> first event past the start position, at the last (re)connect",
          m.last_seek_ms / 1e3);
    gauge("connected", "1 while the binlog connection is up", m.connected ? 1.0 : 0.0);
}

// Every numeric field of InspectorMetrics (invalidation/consistency_inspector.h), all tables.
void add_inspector_metrics(Families& families, const InspectorMetrics& m, const Labels& labels) {
    const auto counter = [&](const char* name, const char* help, std::uint64_t value) {
        add_scalar(families, "lockstep_inspector_" + std::string(name) + "_total", help, false, value, labels);
    };
    const auto gauge = [&](const char* name, const char* help, double value) {
        add_gauge(families, "lockstep_inspector_" + std::string(name), help, value, labels);
    };
    counter("rows_seen", "changed rows of watched tables", m.rows_seen);
    counter("sampled", "changed rows scheduled for a check", m.sampled);
    counter("checked", "first checks done", m.checked);
    counter("stale", "entries found stale at their first check", m.stale);
    counter("stale_by_content", "entries stale by content while the version said fresh", m.stale_by_content);
    counter("stale_given_up", "entries stale for longer than track_for", m.stale_given_up);
    counter("check_errors", "checks whose Redis or database read failed", m.check_errors);
    counter("content_reads", "committed rows read to compare content", m.content_reads);
    counter("deferred", "checks deferred behind a newer change of their key", m.deferred);
    counter("reconnects", "binlog connections re-established", m.reconnects);
    gauge("stale_open", "entries found stale and still stale now", static_cast<double>(m.stale_open));
    gauge("stale_per_million", "stale entries per million checked writes, since start", m.stale_per_million);
    gauge("staleness_p50_seconds", "how long stale entries stayed stale, median", m.staleness_p50_ms / 1e3);
    gauge("staleness_p99_seconds", "how long stale entries stayed stale, 99th percentile", m.staleness_p99_ms / 1e3);
    gauge("staleness_max_seconds", "how long stale entries stayed stale, maximum", m.staleness_max_ms / 1e3);
    gauge("connected", "1 while the inspector's binlog connection is up", m.connected ? 1.0 : 0.0);
    // The local entries of the near caches it watches (InspectorMetrics::near_cache).
    const InspectorTableMetrics& n = m.near_cache;
    counter("near_rows_seen", "changed rows of entities whose near caches are watched, per near cache", n.rows_seen);
    counter("near_checked", "near-cache entries judged at their first check", n.checked);
    counter("near_stale", "near-cache entries found stale at their first check", n.stale);
    counter("near_stale_by_content", "near-cache entries stale by content while the version said fresh",
            n.stale_by_content);
    counter("near_stale_given_up", "near-cache entries stale for longer than track_for", n.stale_given_up);
    gauge("near_stale_open", "near-cache entries found stale and still stale now", static_cast<double>(n.stale_open));
    gauge("near_stale_per_million", "stale near-cache entries per million checked, since start", n.stale_per_million);
    gauge("near_staleness_p50_seconds", "how long stale near-cache entries stayed stale, median",
          n.staleness_p50_ms / 1e3);
    gauge("near_staleness_p99_seconds", "how long stale near-cache entries stayed stale, 99th percentile",
          n.staleness_p99_ms / 1e3);
    gauge("near_staleness_max_seconds", "how long stale near-cache entries stayed stale, maximum",
          n.staleness_max_ms / 1e3);
}

}  // namespace

void PrometheusCollector::add_invalidator(std::string name, std::function<InvalidatorMetrics()> snapshot) {
    MutexLock lock(mutex_);
    invalidators_.push_back({std::move(name), std::move(snapshot)});
}

void PrometheusCollector::add_inspector(std::string name, std::function<InspectorMetrics()> snapshot) {
    MutexLock lock(mutex_);
    inspectors_.push_back({std::move(name), std::move(snapshot)});
}

void PrometheusCollector::add_repository(std::string name, std::function<RepositoryMetrics()> snapshot) {
    MutexLock lock(mutex_);
    sources_.push_back({std::move(name), std::move(snapshot)});
}

void PrometheusCollector::add_lock_client(std::string name, std::function<LockClientStats()> snapshot) {
    MutexLock lock(mutex_);
    lock_clients_.push_back({std::move(name), std::move(snapshot)});
}

std::vector<prometheus::MetricFamily> PrometheusCollector::Collect() const {
    std::vector<Source> sources;
    std::vector<LockClientSource> lock_clients;
    std::vector<NamedSource<InvalidatorMetrics>> invalidators;
    std::vector<NamedSource<InspectorMetrics>> inspectors;
    {
        MutexLock lock(mutex_);
        sources = sources_;
        lock_clients = lock_clients_;
        invalidators = invalidators_;
        inspectors = inspectors_;
    }
    // One family per metric name, one metric per repository or lock client, in a stable order.
    Families families;
    for (const auto& source : sources) {
        const RepositoryMetrics m = source.snapshot();
        const Labels labels = {{"repository", source.name}};
        for_each_metric(
            m,
            [&](const char* name, const char* help, std::uint64_t value) {
                const bool gauge = metric_kind(name) == MetricKind::Gauge;
                add_scalar(families, "lockstep_repository_" + std::string(name) + (gauge ? "" : "_total"), help,
                           gauge, value, labels);
            },
            [&](const char* name, const char* help, const HistogramSnapshot& h) {
                add_histogram(families, "lockstep_repository_" + std::string(name) + "_seconds", help, h, labels);
            });
    }
    for (const auto& source : lock_clients) {
        add_lock_client_stats(families, source.snapshot(), {{"lock_client", source.name}});
    }
    for (const auto& source : invalidators) {
        add_invalidator_metrics(families, source.snapshot(), {{"invalidator", source.name}});
    }
    for (const auto& source : inspectors) {
        add_inspector_metrics(families, source.snapshot(), {{"inspector", source.name}});
    }
    std::vector<prometheus::MetricFamily> out;
    out.reserve(families.size());
    for (auto& [name, family] : families) out.push_back(std::move(family));
    return out;
}

std::string prometheus_text(const prometheus::Collectable& collector) {
    std::ostringstream out;
    prometheus::TextSerializer().Serialize(out, collector.Collect());
    return out.str();
}

}  // namespace lockstep
