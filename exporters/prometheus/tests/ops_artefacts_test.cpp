// ops/grafana/lockstep.json and ops/prometheus/lockstep-alerts.yml name only metrics the exporter
// serves: a PrometheusCollector with one source of each kind (repository, lock client, binlog
// follower, inspector) is scraped over loopback from a prometheus-cpp Exposer, and every
// `lockstep_...` name in the two files must be one of the served series (histogram _bucket, _sum
// and _count included). The sources' values do not matter: the exporter serves every name for
// every source. The alert table of docs/operations.md is checked against the rules file.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <prometheus/exposer.h>

#include "lockstep/exporters/prometheus_collector.h"

namespace lockstep {
namespace {

std::string http_get(int port, const std::string& path) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    EXPECT_EQ(::send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
    std::string response;
    char buffer[4096];
    for (ssize_t n; (n = ::recv(fd, buffer, sizeof buffer, 0)) > 0;) response.append(buffer, static_cast<std::size_t>(n));
    ::close(fd);
    return response;
}

// The series names of a text exposition: the name of every sample line.
std::set<std::string> served_names(const std::string& body) {
    std::set<std::string> names;
    std::istringstream in(body);
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] == '#') continue;
        const auto end = line.find_first_of("{ ");
        if (end != std::string::npos && line.rfind("lockstep_", 0) == 0) names.insert(line.substr(0, end));
    }
    return names;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    EXPECT_TRUE(in.good()) << "cannot read " << path;
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

// Every metric name a file refers to: each `lockstep_<name>` token.
std::set<std::string> referenced_names(const std::string& text) {
    static const std::regex name(R"(\blockstep_[a-z0-9_]+)");
    std::set<std::string> names;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), name); it != std::sregex_iterator(); ++it) {
        names.insert(it->str());
    }
    return names;
}

// One scrape for the suite: stopping an Exposer takes about 2 s (civetweb's poll interval).
class OpsArtefacts : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        auto collector = std::make_shared<PrometheusCollector>();
        collector->add_repository("product", [] { return RepositoryMetrics{}; });
        collector->add_lock_client("orders", [] { return LockClientStats{}; });
        collector->add_invalidator("catalog", [] { return InvalidatorMetrics{}; });
        collector->add_inspector("catalog", [] { return InspectorMetrics{}; });
        prometheus::Exposer exposer{"127.0.0.1:0"};
        exposer.RegisterCollectable(collector);
        ASSERT_EQ(exposer.GetListeningPorts().size(), 1u);
        const std::string response = http_get(exposer.GetListeningPorts().front(), "/metrics");
        ASSERT_NE(response.find("HTTP/1.1 200"), std::string::npos) << response;
        served_ = served_names(response);
    }

    void expect_all_served(const std::string& file, std::size_t at_least) {
        const auto names = referenced_names(read_file(std::string(LOCKSTEP_SOURCE_DIR) + "/" + file));
        EXPECT_GE(names.size(), at_least) << file << " names fewer metrics than expected: is it the right file?";
        for (const auto& name : names) {
            EXPECT_TRUE(served_.count(name)) << file << " names " << name << ", which the exporter does not serve";
        }
    }

    static inline std::set<std::string> served_;
};

TEST_F(OpsArtefacts, TheExporterServesEveryKindOfSource) {
    for (const char* name : {"lockstep_repository_deletes_retried_total", "lockstep_lock_client_losses_total",
                             "lockstep_lock_client_acquire_latency_seconds_bucket", "lockstep_invalidator_connected",
                             "lockstep_invalidator_lag_p99_seconds", "lockstep_inspector_stale_total",
                             "lockstep_inspector_stale_per_million"}) {
        EXPECT_TRUE(served_.count(name)) << name;
    }
}

TEST_F(OpsArtefacts, TheAlertRulesNameOnlyServedMetrics) { expect_all_served("ops/prometheus/lockstep-alerts.yml", 15); }

// docs/operations.md's table of alerts lists exactly the rules of the file.
TEST(OpsArtefactsDocs, TheOperationsPageListsEveryAlertRuleAndNoOther) {
    const auto matches = [](const std::string& text, const std::regex& pattern) {
        std::set<std::string> found;
        for (auto it = std::sregex_iterator(text.begin(), text.end(), pattern); it != std::sregex_iterator(); ++it) {
            found.insert((*it)[1].str());
        }
        return found;
    };
    const auto rules = matches(read_file(std::string(LOCKSTEP_SOURCE_DIR) + "/ops/prometheus/lockstep-alerts.yml"),
                               std::regex(R"(- alert: (\w+))"));
    const auto documented = matches(read_file(std::string(LOCKSTEP_SOURCE_DIR) + "/docs/operations.md"),
                                    std::regex(R"(\n\| `(Lockstep\w+)` \|)"));
    EXPECT_GE(rules.size(), 10u);
    EXPECT_EQ(rules, documented);
}

TEST_F(OpsArtefacts, TheDashboardNamesOnlyServedMetrics) {
    expect_all_served("ops/grafana/lockstep.json", 30);
    // And it is a dashboard: JSON with panels whose queries are set.
    const auto dashboard = nlohmann::json::parse(read_file(std::string(LOCKSTEP_SOURCE_DIR) + "/ops/grafana/lockstep.json"));
    std::size_t queries = 0;
    for (const auto& panel : dashboard.at("panels")) {
        if (panel.at("type") == "row") continue;
        ASSERT_FALSE(panel.at("targets").empty()) << panel.at("title");
        for (const auto& target : panel.at("targets")) {
            EXPECT_FALSE(target.at("expr").get<std::string>().empty()) << panel.at("title");
            ++queries;
        }
    }
    EXPECT_GE(queries, 20u);
}

}  // namespace
}  // namespace lockstep
