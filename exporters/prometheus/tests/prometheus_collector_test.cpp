// The Prometheus text exposition of a repository's metrics snapshot (no servers needed: the
// snapshot is built by hand; the repository side is tested in tests/strategies).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>
#include <prometheus/exposer.h>

#include "lockstep/cache/redis_client.h"
#include "lockstep/exporters/prometheus_collector.h"
#include "lockstep/locks/redis_mutex.h"
#include "lockstep/servers/local_servers.h"

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

// GET /metrics from 127.0.0.1:port, the body (what a Prometheus server scrapes).
std::string http_get_metrics(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    EXPECT_EQ(::send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
    std::string response;
    char buffer[4096];
    for (ssize_t n; (n = ::recv(fd, buffer, sizeof buffer, 0)) > 0;) response.append(buffer, static_cast<std::size_t>(n));
    ::close(fd);
    return response;
}

// A real RedisLockClient: one uncontended hold of at least 20 ms, then one acquisition that
// waited for it; both histograms are scraped over HTTP. The waits are on the real state (the
// waiter has run its acquire script), and the bounds are lower bounds the code enforces (the
// hold lasts >= 20 ms because the holder sleeps inside it), so load cannot make it fail.
TEST(PrometheusCollector, ScrapesTheLockClientsAcquireLatencyAndHoldTimeHistograms) {
    LocalServersOptions options;
    options.mysql = false;
    LocalServers servers(options);
    RedisClient redis(servers.redis_options());
    RedisLockClient locks(redis);
    auto collector = std::make_shared<PrometheusCollector>();
    collector->add_lock_client("orders", [&] { return locks.stats(); });
    prometheus::Exposer exposer("127.0.0.1:0");
    exposer.RegisterCollectable(collector);
    ASSERT_EQ(exposer.GetListeningPorts().size(), 1u);
    const int port = exposer.GetListeningPorts().front();

    RedisMutex first(locks, "prometheus:first");
    RedisMutex second(locks, "prometheus:first");
    first.lock();
    // Both lock objects belong to one client, so the waiter queues at the client's local gate
    // (docs/locks.md "The local gate"), not in Redis: it counts one gate wait.
    const auto gate_waits_before = locks.stats().gate_waits;
    std::atomic<bool> waiter_acquired{false};
    std::thread waiter([&] {
        second.lock();
        waiter_acquired = true;
        second.unlock();
    });
    // The waiter is queued behind the held lock.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (locks.stats().gate_waits == gate_waits_before && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_EQ(locks.stats().gate_waits, gate_waits_before + 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a lower bound on the hold, not a wait
    EXPECT_FALSE(waiter_acquired.load());
    first.unlock();
    waiter.join();

    const std::string text = http_get_metrics(port);
    const auto has = [&](const std::string& line) {
        EXPECT_NE(text.find(line), std::string::npos) << "missing: " << line << "\n" << text;
    };
    has("HTTP/1.1 200");
    has("# TYPE lockstep_lock_client_acquire_latency_seconds histogram");
    has("# TYPE lockstep_lock_client_hold_time_seconds histogram");
    has("lockstep_lock_client_acquired_total{lock_client=\"orders\"} 2");
    has("lockstep_lock_client_acquire_latency_seconds_count{lock_client=\"orders\"} 2");
    has("lockstep_lock_client_hold_time_seconds_count{lock_client=\"orders\"} 2");
    has("lockstep_lock_client_gate_waits_total{lock_client=\"orders\"} 1");
    // The first hold lasted >= 20 ms and the waiter waited >= 20 ms, so at most one of each is
    // at or below the 16.384 ms bound (the other's time depends on the machine's load).
    const auto value = [&](const std::string& series) {
        const auto at = text.find(series + " ");
        if (at == std::string::npos) {
            ADD_FAILURE() << "missing: " << series << "\n" << text;
            return -1.0;
        }
        return std::stod(text.substr(at + series.size() + 1));
    };
    EXPECT_LE(value("lockstep_lock_client_hold_time_seconds_bucket{lock_client=\"orders\",le=\"0.016384\"}"), 1.0);
    EXPECT_LE(value("lockstep_lock_client_acquire_latency_seconds_bucket{lock_client=\"orders\",le=\"0.016384\"}"),
              1.0);
    EXPECT_GE(value("lockstep_lock_client_hold_time_seconds_sum{lock_client=\"orders\"}"), 0.020);
    EXPECT_GE(value("lockstep_lock_client_acquire_latency_seconds_sum{lock_client=\"orders\"}"), 0.020);
    has("lockstep_lock_client_hold_time_seconds_bucket{lock_client=\"orders\",le=\"+Inf\"} 2");
    has("lockstep_lock_client_acquire_latency_seconds_bucket{lock_client=\"orders\",le=\"+Inf\"} 2");
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
