// The listings of RepositoryMetrics, each generated from repository_metrics.def.
#include "lockstep/strategies/repository_metrics.h"

namespace lockstep {

std::string to_string(const RepositoryMetrics& m) {
    std::string out;
    for_each_metric(
        m,
        [&](const char* name, const char*, std::uint64_t v) {
            if (!out.empty()) out += ' ';
            out += name;
            out += '=';
            out += std::to_string(v);
        },
        [](const char*, const char*, const HistogramSnapshot&) {});
    return out;
}

std::string latency_report(const RepositoryMetrics& m) {
    std::string out;
    for_each_metric(
        m, [](const char*, const char*, std::uint64_t) {},
        [&](const char* name, const char*, const HistogramSnapshot& h) {
            out += std::string(name) + ": " + to_string(h) + "\n";
        });
    return out;
}

MetricKind metric_kind(std::string_view name) noexcept {
#define LOCKSTEP_COUNTER(metric, help) \
    if (name == #metric) return MetricKind::Counter;
#define LOCKSTEP_GAUGE(metric, help) \
    if (name == #metric) return MetricKind::Gauge;
#include "lockstep/strategies/repository_metrics.def"
    return MetricKind::Counter;
}

}  // namespace lockstep
