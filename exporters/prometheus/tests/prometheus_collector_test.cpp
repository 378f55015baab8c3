// The Prometheus text exposition of a repository's metrics snapshot (no servers needed: the
// snapshot is built by hand; the repository side is tested in tests/strategies).
#include <gtest/gtest.h>

#include "lockstep/exporters/prometheus_collector.h"

namespace lockstep {
namespace {

TEST(PrometheusCollector, ExportsCountersGaugesAndHistogramsPerRepository) {
    LatencyHistogram hits;
    hits.record(std::chrono::microseconds(300));
    hits.record(std::chrono::microseconds(3));
    RepositoryMetrics m;
    m.hits = 2;
    m.deletes_pending = 4;
    m.latency.hit = hits.snapshot();
    auto collector = std::make_shared<PrometheusCollector>();
    collector->add_repository("product", [&] { return m; });
    collector->add_repository("account", [] { return RepositoryMetrics{}; });
    const std::string text = prometheus_text(*collector);
    EXPECT_NE(text.find("# TYPE lockstep_repository_hits_total counter"), std::string::npos) << text;
    EXPECT_NE(text.find("lockstep_repository_hits_total{repository=\"product\"} 2"), std::string::npos) << text;
    EXPECT_NE(text.find("lockstep_repository_hits_total{repository=\"account\"} 0"), std::string::npos) << text;
    EXPECT_NE(text.find("lockstep_repository_deletes_pending{repository=\"product\"} 4"), std::string::npos) << text;
    EXPECT_NE(text.find("# TYPE lockstep_repository_hit_seconds histogram"), std::string::npos) << text;
    EXPECT_NE(text.find("lockstep_repository_hit_seconds_count{repository=\"product\"} 2"), std::string::npos) << text;
    // 3 µs is in the bucket up to 4 µs; 300 µs up to 512 µs.
    EXPECT_NE(text.find("lockstep_repository_hit_seconds_bucket{repository=\"product\",le=\"4e-06\"} 1"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("lockstep_repository_hit_seconds_bucket{repository=\"product\",le=\"+Inf\"} 2"),
              std::string::npos)
        << text;
}

TEST(LatencyHistogram, QuantilesAreBucketUpperBounds) {
    LatencyHistogram h;
    for (int i = 0; i < 99; ++i) h.record(std::chrono::microseconds(100));
    h.record(std::chrono::milliseconds(50));
    auto s = h.snapshot();
    EXPECT_EQ(s.count, 100u);
    EXPECT_EQ(s.quantile_us(0.5), 128u);
    EXPECT_EQ(s.quantile_us(1.0), 65536u);
    EXPECT_EQ(s.sum_us, 99u * 100u + 50000u);
}

}  // namespace
}  // namespace lockstep
