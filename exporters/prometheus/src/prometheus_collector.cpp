#include "lockstep/exporters/prometheus_collector.h"

#include <limits>
#include <map>
#include <sstream>

#include <prometheus/text_serializer.h>

namespace lockstep {

void PrometheusCollector::add_repository(std::string name, std::function<RepositoryMetrics()> snapshot) {
    MutexLock lock(mutex_);
    sources_.push_back({std::move(name), std::move(snapshot)});
}

std::vector<prometheus::MetricFamily> PrometheusCollector::Collect() const {
    std::vector<Source> sources;
    {
        MutexLock lock(mutex_);
        sources = sources_;
    }
    // One family per metric name, one metric per repository, in a stable order.
    std::map<std::string, prometheus::MetricFamily> families;
    for (const auto& source : sources) {
        const RepositoryMetrics m = source.snapshot();
        const std::vector<prometheus::ClientMetric::Label> labels = {{"repository", source.name}};
        for_each_metric(
            m,
            [&](const char* name, const char* help, std::uint64_t value) {
                const bool gauge = std::string(name) == "deletes_pending";
                const std::string full = "lockstep_repository_" + std::string(name) + (gauge ? "" : "_total");
                auto& family = families[full];
                family.name = full;
                family.help = help;
                family.type = gauge ? prometheus::MetricType::Gauge : prometheus::MetricType::Counter;
                prometheus::ClientMetric metric;
                metric.label = labels;
                if (gauge) {
                    metric.gauge.value = static_cast<double>(value);
                } else {
                    metric.counter.value = static_cast<double>(value);
                }
                family.metric.push_back(std::move(metric));
            },
            [&](const char* name, const char* help, const HistogramSnapshot& h) {
                const std::string full = "lockstep_repository_" + std::string(name) + "_seconds";
                auto& family = families[full];
                family.name = full;
                family.help = help;
                family.type = prometheus::MetricType::Histogram;
                prometheus::ClientMetric metric;
                metric.label = labels;
                metric.histogram.sample_count = h.count;
                metric.histogram.sample_sum = static_cast<double>(h.sum_us) / 1e6;
                std::uint64_t cumulative = 0;
                for (std::size_t i = 0; i + 1 < kHistogramBuckets; ++i) {
                    cumulative += h.buckets[i];
                    metric.histogram.bucket.push_back(
                        {cumulative, static_cast<double>(HistogramSnapshot::upper_bound_us(i)) / 1e6});
                }
                metric.histogram.bucket.push_back({h.count, std::numeric_limits<double>::infinity()});
                family.metric.push_back(std::move(metric));
            });
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
