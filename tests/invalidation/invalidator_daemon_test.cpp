// lockstep-invalidator, the daemon, as a process against the private servers: it deletes the key
// of a bypassing UPDATE (C9), sends the second DEL, and with --inspect reports the consistency
// inspector's findings in its progress lines: here one entry put back stale by hand after both
// DELs (what a fill in a longer window than the delay would leave) is counted stale and open.
// SIGTERM stops it with a last line marked "final" and exit 0, its position saved in
// lockstep_binlog_position. With --metrics-port it serves the follower's and the inspector's
// metrics on /metrics and the connection state on /health (docs/invalidator.md).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "invalidation_test_support.h"
#include "lockstep/core/uri.h"
#include "lockstep/strategies/write_then_delete.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

std::string daemon_path() {
    // build/tests/test_invalidation -> build/invalidation/tools/lockstep-invalidator
    auto self = std::filesystem::read_symlink("/proc/self/exe");
    return (self.parent_path().parent_path() / "invalidation" / "tools" / "lockstep-invalidator").string();
}

// A TCP port free on 127.0.0.1 now (the kernel's choice; released again for the daemon to take).
int free_loopback_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    socklen_t length = sizeof addr;
    EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length), 0);
    ::close(fd);
    return ntohs(addr.sin_port);
}

// GET `path` from 127.0.0.1:port: the whole response, status line included ("" if refused).
std::string http_get(int port, const std::string& path) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::string response;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
        const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
        if (::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size())) {
            char buffer[4096];
            for (ssize_t n; (n = ::recv(fd, buffer, sizeof buffer, 0)) > 0;) {
                response.append(buffer, static_cast<std::size_t>(n));
            }
        }
    }
    ::close(fd);
    return response;
}

// Progress lines until one satisfies `done`; that line, or nullopt at EOF / timeout.
std::optional<nlohmann::json> line_where(Child& d, const std::function<bool(const nlohmann::json&)>& done,
                                         std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return std::nullopt;
        auto line = d.expect("{", left);
        if (!line) return std::nullopt;
        auto j = nlohmann::json::parse(*line);
        if (done(j)) return j;
    }
}

TEST(InvalidatorDaemon, DeletesABypassingUpdatesKeyAndReportsTheInspectorsFindings) {
    const std::string path = daemon_path();
    ASSERT_TRUE(std::filesystem::exists(path)) << "build the lockstep-invalidator target first: " << path;
    const std::string prefix = fresh_prefix();
    RepositoryOptions o;
    o.key_prefix = prefix;
    o.strategy = std::make_shared<WriteThenDelete>();
    o.ttl = 60s;
    CachedRepository<Item> repo(item_entity(), db(), redis(), o);
    const std::int64_t id = fresh_id();
    repo.insert(Item{id, "widget", 100, 5});
    ASSERT_EQ(repo.get(id)->price, 100);
    const std::string key = repo.key_of(id);
    const std::string v1_entry = redis().command({"GET", key}).str();

    const auto config = std::filesystem::temp_directory_path() / ("lsinv_" + prefix.substr(0, prefix.size() - 1) + ".json");
    {
        nlohmann::json c = {{"mysql", to_url(servers().mysql_options())},
                            {"redis", to_url(servers().redis_options())},
                            {"name", "daemon-" + prefix},
                            {"server_id", fresh_server_id()},
                            {"heartbeat_ms", 100},
                            {"flush_on_fresh_start", false},
                            {"tables", {{{"table", "products"}, {"entity", "product"}, {"prefix", prefix}}}},
                            // Checked 5 s after the change: well after both DELs and the stale put-back.
                            {"inspector", {{"server_id", fresh_server_id()}, {"check_after_ms", 5000}}}};
        std::ofstream(config) << c.dump();
    }
    const int metrics_port = free_loopback_port();
    Child d({path, "--config", config.string(), "--progress", "0.2", "--metrics-port", std::to_string(metrics_port)});
    auto up = line_where(d, [](const nlohmann::json& j) {
        return j.at("connected").get<bool>() && j.at("inspector").at("connected").get<bool>();
    }, 30s);
    ASSERT_TRUE(up.has_value()) << "the daemon never reported both streams connected";
    const std::string name = "daemon-" + prefix;
    const std::string health = http_get(metrics_port, "/health");
    EXPECT_NE(health.find("HTTP/1.1 200"), std::string::npos) << health;
    EXPECT_NE(health.find("lockstep_invalidator_connected{invalidator=\"" + name + "\"} 1"), std::string::npos) << health;
    EXPECT_NE(health.find("lockstep_inspector_connected{inspector=\"" + name + "\"} 1"), std::string::npos) << health;

    mariadb_client("UPDATE products SET price = 200, version = version + 1 WHERE id = " + std::to_string(id));
    ASSERT_TRUE(time_until_gone(key, 10s).has_value()) << "the daemon's follower did not delete " << key;
    ASSERT_TRUE(line_where(d, [](const nlohmann::json& j) { return j.at("second_keys_deleted").get<int>() >= 1; }, 20s))
        << "no second DEL reported";
    redis().set(key, v1_entry, 60s);  // stale again, after both DELs

    auto found = line_where(d, [](const nlohmann::json& j) { return j.at("inspector").at("stale").get<int>() >= 1; }, 30s);
    ASSERT_TRUE(found.has_value()) << "the inspector's finding never reached the progress lines";
    EXPECT_EQ(found->at("inspector").at("checked").get<int>(), 1);
    EXPECT_EQ(found->at("inspector").at("stale_open").get<int>(), 1);
    EXPECT_EQ(found->at("inspector").at("stale_per_million").get<double>(), 1e6);
    EXPECT_GT(found->at("elapsed_s").get<double>(), 0);
    // The same findings on the metrics port.
    const std::string metrics = http_get(metrics_port, "/metrics");
    EXPECT_NE(metrics.find("lockstep_inspector_stale_total{inspector=\"" + name + "\"} 1"), std::string::npos) << metrics;
    EXPECT_NE(metrics.find("lockstep_invalidator_second_keys_deleted_total{invalidator=\"" + name + "\"}"),
              std::string::npos)
        << metrics;

    EXPECT_EQ(d.terminate(20s), 0);
    auto last = line_where(d, [](const nlohmann::json& j) { return j.contains("final"); }, 5s);
    ASSERT_TRUE(last.has_value()) << "no final line";
    EXPECT_EQ(last->at("saved_gtid"), last->at("applied_gtid"));
    // Saved where a restart reads it, and the metrics port is closed.
    const auto saved = db().query_one("SELECT gtid FROM lockstep_binlog_position WHERE follower = ?", {name});
    ASSERT_TRUE(saved.has_value()) << "no saved position for " << name;
    EXPECT_EQ(saved->get<std::string>("gtid"), last->at("saved_gtid").get<std::string>());
    EXPECT_EQ(http_get(metrics_port, "/health"), "");
    std::filesystem::remove(config);
    db().execute("DELETE FROM products WHERE id = ?", {id});
}

}  // namespace
}  // namespace lockstep::test
