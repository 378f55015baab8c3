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

}  // namespace

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
    {
        MutexLock lock(mutex_);
        sources = sources_;
        lock_clients = lock_clients_;
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
