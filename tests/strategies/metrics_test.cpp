// The repository's one metrics snapshot: latency histograms filled by real reads, writes and
// locks, and the rate-limited debug lines that follow one key.
#include <gtest/gtest.h>

#include <spdlog/sinks/ostream_sink.h>

#include <sstream>
#include <string>
#include <vector>

#include "lockstep/core/logging.h"
#include "strategies_test_support.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

TEST(RepositoryLatencies, HitsMissesWritesAndLocksAreTimed) {
    const auto id = unique_id();
    ProductCleanup cleanup;
    cleanup.add(id);
    insert_product(id, 10);
    RepositoryOptions o;
    o.key_prefix = unique_key_prefix();
    o.strategy = std::make_shared<WriteThrough>();
    o.lock_mode = LockMode::Mutex;
    o.lock_service = &lock_service();
    CachedRepository<Product> r(product_entity(), db(), redis(), o);
    ASSERT_TRUE(r.get(id));  // miss, lock, load, fill
    ASSERT_TRUE(r.get(id));  // hit
    ASSERT_TRUE(r.get(id));  // hit
    r.update(id, [](Product& p) { p.price = 11; });
    const auto m = r.metrics();
    EXPECT_EQ(m.latency.hit.count, 2u);
    EXPECT_EQ(m.latency.miss_load.count, 1u);
    EXPECT_GE(m.latency.fill.count, 2u) << "the backfill and the write-through set";
    EXPECT_EQ(m.latency.write.count, 1u);
    EXPECT_EQ(m.latency.lock_wait.count, 2u) << "the miss and the write took the key's lock";
    EXPECT_EQ(m.latency.lock_hold.count, 2u);
    EXPECT_EQ(m.latency.cache_error.count, 0u);
    EXPECT_GT(m.latency.miss_load.sum_us, 0u);
    const std::string report = latency_report(m);
    EXPECT_NE(report.find("hit: count=2"), std::string::npos) << report;
    r.remove(id);
}

TEST(RepositoryMetricsListing, ToStringNamesEveryCounterOfForEachMetricWithItsValue) {
    RepositoryMetrics m;
    std::uint64_t next = 101;  // a distinct value per counter, so a swapped pair shows
#define LOCKSTEP_COUNTER(name, help) m.name = next++;
#include "lockstep/strategies/repository_metrics.def"
    std::vector<std::string> expected;
    for_each_metric(
        m,
        [&](const char* name, const char*, std::uint64_t v) {
            expected.push_back(std::string(name) + "=" + std::to_string(v));
        },
        [](const char*, const char*, const HistogramSnapshot&) {});
    ASSERT_GE(expected.size(), 22u);
    std::istringstream line(to_string(m));
    std::vector<std::string> listed;
    for (std::string field; line >> field;) listed.push_back(field);
    EXPECT_EQ(listed, expected) << to_string(m);
    EXPECT_EQ(metric_kind("deletes_pending"), MetricKind::Gauge);
    EXPECT_EQ(metric_kind("hits"), MetricKind::Counter);
}

TEST(RepositoryTrace, DebugLinesFollowOneKeyAndAreRateLimited) {
    const auto id = unique_id();
    ProductCleanup cleanup;
    cleanup.add(id);
    insert_product(id, 10);
    std::ostringstream out;
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
    auto previous = logger();
    auto capture = std::make_shared<spdlog::logger>("capture", sink);
    capture->set_level(spdlog::level::debug);
    set_logger(capture);
    RepositoryOptions o;
    o.key_prefix = unique_key_prefix();
    o.strategy = std::make_shared<Lease>();
    CachedRepository<Product> r(product_entity(), db(), redis(), o);
    const std::string key = r.key_of(id);
    r.get(id);
    r.get(id);
    r.update(id, [](Product& p) { p.price = 12; });
    for (int i = 0; i < 1000; ++i) r.get(id);
    set_logger(previous);
    const std::string log = out.str();
    for (const char* step : {" miss", " loaded from the database", " filled v", " hit", " deleted (invalidation)"}) {
        EXPECT_NE(log.find(key + step), std::string::npos) << step << " in:\n" << log.substr(0, 2000);
    }
    std::size_t lines = 0;
    for (char c : log) lines += c == '\n';
    // 1,000 hits and a few more steps, within at most two one-second windows of 200 lines.
    EXPECT_LE(lines, 2 * 200u + 10u) << "at most 200 trace lines per second per repository";
}

TEST(RepositoryWrites, ANestedWriteOfTheSameIdFailsFastInsteadOfWaitingForItself) {
    const auto id = unique_id();
    ProductCleanup cleanup;
    cleanup.add(id);
    insert_product(id, 10);
    RepositoryOptions o;
    o.key_prefix = unique_key_prefix();
    CachedRepository<Product> r(product_entity(), db(), redis(), o);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_THROW(r.update(id, [&](Product&) { r.update(id, [](Product& q) { q.price = 1; }); }), ConfigError);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
    EXPECT_EQ(db_price(id), 10) << "the outer write rolled back";
    EXPECT_TRUE(r.update(id, [](Product& p) { p.price = 2; })) << "and the id is writable again";
}

}  // namespace
}  // namespace lockstep::test
