// lockstep-demo, run as a user runs it: the built binary (<build>/demo/lockstep-demo, found next
// to this test's build directory) against this test binary's private servers, every scenario
// with its results read back from --json.
//
//   - every forced interleaving 20 times (--repeat 20), with worker threads and with two worker
//     processes: each must reproduce in every run without protection and never with it;
//   - a short load run of every scenario, threads and two processes;
//   - every verdict in the JSON is ok, and the exit status says so.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <iterator>
#include <regex>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_servers.h"

namespace lockstep::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path demo_binary() {
    // <build>/tests/test_demo -> <build>/demo/lockstep-demo
    return fs::canonical("/proc/self/exe").parent_path().parent_path() / "demo" / "lockstep-demo";
}

std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) {
        if (c == '\'') {
            q += "'\\''";
        } else {
            q += c;
        }
    }
    return q + "'";
}

struct DemoRun {
    int status = -1;
    std::string out;  // stdout: the tables
    json results;     // --json
};

// Runs the demo with `args` against this binary's servers.
DemoRun run_demo(const std::vector<std::string>& args, bool with_json = true) {
    static int counter = 0;
    const char* tmp = std::getenv("TMPDIR");
    fs::path json_path = fs::path(tmp ? tmp : "/tmp") / ("demo-" + std::to_string(::getpid()) + "-" +
                                                          std::to_string(++counter) + ".json");
    std::string cmd = quote(demo_binary().string());
    for (const auto& a : args) cmd += " " + quote(a);
    cmd += " --redis " + quote(servers().redis_url()) + " --mysql " + quote(servers().mysql_url());
    if (with_json) cmd += " --json " + quote(json_path.string());
    DemoRun run;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return run;
    std::array<char, 4096> buf;
    std::size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) run.out.append(buf.data(), n);
    int status = ::pclose(p);
    run.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (with_json && fs::exists(json_path)) {
        std::ifstream f(json_path);
        try {
            run.results = json::parse(f);
        } catch (const std::exception& e) {
            ADD_FAILURE() << "unreadable JSON: " << e.what();
        }
        fs::remove(json_path);
    }
    return run;
}

// The demo's race registry (lockstep-demo --list --json -): every race case with its rows and
// the outcome each must show. The test checks the runs against it, so a race added to the
// registry is tested without editing this file. Needs no servers.
const json& registry() {
    static const json reg = [] {
        json r = json::array();
        if (!fs::exists(demo_binary())) return r;
        std::string cmd = quote(demo_binary().string()) + " --list --json -";
        FILE* p = ::popen(cmd.c_str(), "r");
        if (!p) return r;
        std::string out;
        std::array<char, 4096> buf;
        std::size_t n;
        while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
        ::pclose(p);
        try {
            r = json::parse(out);
        } catch (const std::exception&) {
        }
        return r;
    }();
    return reg;
}

// A registered row: "race|protection|mode" -> expected.
std::map<std::string, std::string> registered_rows(const std::string& scenario, const std::string& mode) {
    std::map<std::string, std::string> rows;
    for (const auto& c : registry()) {
        if (c["scenario"] != scenario) continue;
        for (const auto& r : c["rows"]) {
            if (r["mode"] != mode) continue;
            rows[c["race"].get<std::string>() + "|" + r["protection"].get<std::string>() + "|" + mode] =
                r["expected"].get<std::string>();
        }
    }
    return rows;
}

// The scenarios in registry order, and whether each has rows of `mode`.
std::vector<std::string> scenarios_with(const std::string& mode) {
    std::vector<std::string> out;
    for (const auto& c : registry()) {
        const std::string s = c["scenario"];
        bool has = false;
        for (const auto& r : c["rows"]) has = has || r["mode"] == mode;
        if (has && std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
    }
    return out;
}

class DemoTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!fs::exists(demo_binary())) GTEST_SKIP() << "lockstep-demo is not built (" << demo_binary() << ")";
    }
};

// Every row has the fields the issue asks for, with allowed values, and an ok verdict.
void expect_rows_ok(const DemoRun& run, const std::string& scenario, const std::string& mode, int repeat) {
    ASSERT_TRUE(run.results.is_array()) << run.out;
    ASSERT_FALSE(run.results.empty()) << run.out;
    auto expected_rows = registered_rows(scenario, mode);
    ASSERT_FALSE(expected_rows.empty()) << "the registry has no " << mode << " rows for " << scenario;
    std::set<std::string> seen;
    for (const auto& r : run.results) {
        SCOPED_TRACE(r.dump());
        for (const char* field : {"scenario", "race", "protection", "mode", "expected", "observed", "verdict", "metrics"}) {
            ASSERT_TRUE(r.contains(field)) << "missing " << field;
        }
        EXPECT_EQ(r["scenario"], scenario);
        EXPECT_EQ(r["mode"], mode);
        EXPECT_TRUE(r["expected"] == "reproduced" || r["expected"] == "prevented");
        EXPECT_TRUE(r["observed"] == "reproduced" || r["observed"] == "prevented");
        EXPECT_TRUE(r["metrics"].is_object());
        for (const auto& [name, value] : r["metrics"].items()) EXPECT_TRUE(value.is_number()) << name;
        EXPECT_EQ(r["verdict"], "ok") << r["scenario"] << " / " << r["race"] << " / " << r["protection"] << ": "
                                      << r.value("evidence", "") << " " << r.value("error", "");
        if (mode == "forced" && scenario != "smoke") {
            // A forced interleaving is deterministic: every run shows what was expected.
            EXPECT_EQ(r["observed"], r["expected"]);
            ASSERT_TRUE(r["metrics"].contains("runs"));
            EXPECT_EQ(r["metrics"]["runs"].get<int>(), repeat);
            EXPECT_EQ(r["metrics"]["reproduced_runs"].get<int>(), r["expected"] == "reproduced" ? repeat : 0);
        } else if (r["expected"] == "prevented") {
            EXPECT_EQ(r["observed"], "prevented");
        }
        // Every row is registered, once, with the outcome the registry expects.
        const std::string key = r["race"].get<std::string>() + "|" + r["protection"].get<std::string>() + "|" + mode;
        auto it = expected_rows.find(key);
        if (it == expected_rows.end()) {
            ADD_FAILURE() << "row not in the registry: " << key;
        } else {
            EXPECT_EQ(r["expected"], it->second) << key;
        }
        EXPECT_TRUE(seen.insert(key).second) << "row reported twice: " << key;
    }
    // And every registered row ran.
    for (const auto& [key, outcome] : expected_rows) EXPECT_TRUE(seen.count(key)) << "registered row did not run: " << key;
    EXPECT_EQ(run.status, 0) << "every verdict ok, yet exit status " << run.status;
}

TEST_F(DemoTest, RegistryListsEveryRaceCaseWithItsRows) {
    ASSERT_TRUE(registry().is_array());
    ASSERT_FALSE(registry().empty());
    std::set<std::string> ids;
    for (const auto& c : registry()) {
        SCOPED_TRACE(c.dump());
        for (const char* field : {"scenario", "race", "forces", "roles", "load", "rows"}) ASSERT_TRUE(c.contains(field)) << field;
        EXPECT_FALSE(c["rows"].empty());
        EXPECT_FALSE(c["forces"].get<std::string>().empty());
        ids.insert(c["race"].get<std::string>());
    }
    // Every id of docs/races.md has a demo row.
    for (const char* id : {"O1", "O2", "O3", "L1", "L2", "L3", "L4", "L5", "L6", "L7", "L8", "L9", "L10", "C1", "C2", "C3",
                           "C4", "C5", "C6", "C7", "C8", "C9", "C10", "C11", "C12"}) {
        EXPECT_TRUE(ids.count(id)) << id << " has no race case";
    }
}

TEST_F(DemoTest, ListNamesEveryScenarioRaceAndProtection) {
    DemoRun run = run_demo({"--list"}, false);
    ASSERT_EQ(run.status, 0);
    for (const auto& c : registry()) {
        const std::string name = c["scenario"];
        auto at = run.out.find(name + " ");
        ASSERT_NE(at, std::string::npos) << name << " missing from --list:\n" << run.out;
        std::string line = run.out.substr(at, run.out.find('\n', at) - at);
        const std::string race = c["race"];
        if (race.find('-') == std::string::npos) {
            EXPECT_NE(line.find(race), std::string::npos) << name << " does not list " << race;
        }
        for (const auto& r : c["rows"]) EXPECT_NE(run.out.find(r["protection"].get<std::string>()), std::string::npos);
    }
}

TEST_F(DemoTest, HelpExplainsEveryScenario) {
    DemoRun run = run_demo({"--help"}, false);
    ASSERT_EQ(run.status, 0);
    for (const auto& c : registry()) EXPECT_NE(run.out.find("  " + c["scenario"].get<std::string>() + " "), std::string::npos);
    for (const char* option : {"--threads", "--processes", "--iterations", "--seed", "--json", "--redis", "--mysql", "--list",
                               "--race", "--protection", "--html"}) {
        EXPECT_NE(run.out.find(option), std::string::npos) << option;
    }
}

TEST_F(DemoTest, UnknownRaceIsRefused) {
    DemoRun run = run_demo({"--race", "X99"}, false);
    EXPECT_EQ(run.status, 2);
}

// --race C2 runs every row of C2 and nothing else; --protection narrows to matching protections.
TEST_F(DemoTest, RaceAndProtectionFiltersSelectRows) {
    DemoRun run = run_demo({"--only", "forced", "--race", "C2", "--protection", "Lease"});
    ASSERT_EQ(run.status, 0) << run.out;
    ASSERT_TRUE(run.results.is_array());
    int lease_rows = 0;
    for (const auto& [key, outcome] : registered_rows("stale-cache", "forced")) {
        if (key.rfind("C2|", 0) == 0 && key.find("Lease") != std::string::npos) ++lease_rows;
    }
    ASSERT_GT(lease_rows, 0);
    EXPECT_EQ(static_cast<int>(run.results.size()), lease_rows) << run.out;
    for (const auto& r : run.results) {
        EXPECT_EQ(r["race"], "C2");
        EXPECT_NE(r["protection"].get<std::string>().find("Lease"), std::string::npos);
        EXPECT_EQ(r["verdict"], "ok");
    }
}

TEST_F(DemoTest, UnknownScenarioIsRefused) {
    DemoRun run = run_demo({"no-such-scenario"}, false);
    EXPECT_EQ(run.status, 2);
}

TEST_F(DemoTest, SmokeConnectsToBothServers) {
    DemoRun run = run_demo({"smoke"});
    expect_rows_ok(run, "smoke", "forced", 1);
    EXPECT_NE(run.out.find("PONG"), std::string::npos) << run.out;
}

TEST_F(DemoTest, JsonToStdoutKeepsTheTablesOnStderr) {
    std::string cmd = quote(demo_binary().string()) + " smoke --json - --redis " + quote(servers().redis_url()) +
                      " --mysql " + quote(servers().mysql_url()) + " 2>/dev/null";
    FILE* p = ::popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    std::array<char, 4096> buf;
    std::size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
    ASSERT_EQ(WEXITSTATUS(::pclose(p)), 0);
    json parsed = json::parse(out);  // nothing but JSON on stdout
    ASSERT_EQ(parsed.size(), 1u);
    EXPECT_EQ(parsed[0]["scenario"], "smoke");
}

std::string unescape(std::string s) {
    const std::pair<const char*, const char*> map[] = {{"&quot;", "\""}, {"&lt;", "<"}, {"&gt;", ">"}, {"&amp;", "&"}};
    for (const auto& [from, to] : map) {
        for (auto at = s.find(from); at != std::string::npos; at = s.find(from, at + 1)) s.replace(at, std::strlen(from), to);
    }
    return s;
}

// The elements of one class in the page, each as its data-* attributes.
std::vector<std::map<std::string, std::string>> elements(const std::string& page, const std::string& cls) {
    std::vector<std::map<std::string, std::string>> out;
    const std::regex element("class=\"" + cls + "\"([^>]*)>");
    const std::regex attribute("data-([a-z0-9_]+)=\"([^\"]*)\"");
    for (std::sregex_iterator it(page.begin(), page.end(), element), end; it != end; ++it) {
        std::map<std::string, std::string> attrs;
        const std::string inner = (*it)[1];
        for (std::sregex_iterator a(inner.begin(), inner.end(), attribute); a != end; ++a) attrs[(*a)[1]] = unescape((*a)[2]);
        out.push_back(attrs);
    }
    return out;
}

// --html: one self-contained page whose charts carry this run's numbers (read back from its JSON).
TEST_F(DemoTest, HtmlPageIsSelfContainedAndItsChartsCarryTheRunsNumbers) {
    const char* tmp = std::getenv("TMPDIR");
    const fs::path html = fs::path(tmp ? tmp : "/tmp") / ("demo-" + std::to_string(::getpid()) + ".html");
    DemoRun run = run_demo({"--only", "load", "--iterations", "30", "--race", "C1", "--race", "L7", "--html", html.string()});
    ASSERT_EQ(run.status, 0) << run.out;
    ASSERT_TRUE(fs::exists(html));
    std::string page;
    {
        std::ifstream f(html);
        page.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    }
    fs::remove(html);
    // Self-contained: no scripts, nothing fetched.
    for (const char* banned : {"<script", " src=", "href=\"http", "url(", "@import"}) {
        EXPECT_EQ(page.find(banned), std::string::npos) << banned;
    }
    ASSERT_NE(page.find("<table id=\"results\""), std::string::npos);
    auto metric = [](const json& r, const std::string& name) { return r["metrics"][name].get<double>(); };
    auto near = [](double a, const std::string& b) { return std::abs(a - std::stod(b)) <= 1e-5 * std::max(1.0, std::abs(a)); };
    std::map<std::string, json> rows;
    for (const auto& r : run.results) {
        rows[r["race"].get<std::string>() + " | " + r["protection"].get<std::string>() + " | " + r["mode"].get<std::string>()] = r;
        // Every result is a row of the page's table.
        EXPECT_NE(page.find(r["protection"].get<std::string>().substr(0, 8)), std::string::npos);
    }
    // Stale reads after the write vs throughput: one point per stale-cache load row.
    auto points = elements(page, "pt");
    int stale_rows = 0;
    for (const auto& [id, r] : rows) stale_rows += r["scenario"] == "stale-cache" ? 1 : 0;
    ASSERT_GT(stale_rows, 0);
    EXPECT_EQ(static_cast<int>(points.size()), stale_rows);
    for (const auto& p : points) {
        ASSERT_TRUE(rows.count(p.at("row"))) << p.at("row");
        const json& r = rows[p.at("row")];
        EXPECT_TRUE(near(metric(r, "ops_per_s"), p.at("x"))) << p.at("row");
        EXPECT_TRUE(near(metric(r, "lasting_stale_reads"), p.at("y"))) << p.at("row");
    }
    // Stale entry lifetimes: every bucket of every stale-cache load row.
    auto lives = elements(page, "life");
    EXPECT_EQ(static_cast<int>(lives.size()), stale_rows * 8);
    for (const auto& l : lives) {
        ASSERT_TRUE(rows.count(l.at("row")));
        EXPECT_TRUE(near(metric(rows[l.at("row")], l.at("bucket")), l.at("count"))) << l.at("row") << " " << l.at("bucket");
    }
    // Cost beside effect: a pair of bars per load row.
    auto costs = elements(page, "cost");
    auto effects = elements(page, "effect");
    EXPECT_EQ(costs.size(), run.results.size());
    EXPECT_EQ(effects.size(), run.results.size());
    for (const auto& list : {costs, effects}) {
        for (const auto& b : list) {
            ASSERT_TRUE(rows.count(b.at("row")));
            EXPECT_TRUE(near(metric(rows[b.at("row")], b.at("metric")), b.at("value"))) << b.at("row");
        }
    }
    // Hand-over latency per lock: the L7 rows.
    auto handovers = elements(page, "handover");
    int l7 = 0;
    for (const auto& [id, r] : rows) l7 += r["race"] == "L7" ? 1 : 0;
    ASSERT_GT(l7, 0);
    EXPECT_EQ(static_cast<int>(handovers.size()), l7);
    for (const auto& h : handovers) {
        ASSERT_TRUE(rows.count(h.at("row")));
        EXPECT_TRUE(near(metric(rows[h.at("row")], "handover_p50_ms"), h.at("p50")));
        EXPECT_TRUE(near(metric(rows[h.at("row")], "handover_max_ms"), h.at("max")));
    }
}

// Scenario x worker placement.
struct Case {
    std::string scenario;
    bool processes;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
    std::string s;
    for (char c : info.param.scenario) s += c == '-' ? '_' : c;
    return s + (info.param.processes ? "_Processes" : "_Threads");
}

std::vector<std::string> placement(bool processes) {
    return processes ? std::vector<std::string>{"--processes", "2", "--threads", "2"}
                     : std::vector<std::string>{"--threads", "4"};
}

std::vector<Case> race_cases(bool load) {
    std::vector<Case> all;
    for (const auto& name : scenarios_with(load ? "load" : "forced")) {
        if (name == "smoke") continue;  // SmokeConnectsToBothServers
        all.push_back({name, false});
        all.push_back({name, true});
    }
    return all;
}

class ForcedInterleavings : public DemoTest, public ::testing::WithParamInterface<Case> {};

TEST_P(ForcedInterleavings, ReproduceInEveryOneOfTwentyRunsAndNeverWithTheirProtection) {
    auto args = placement(GetParam().processes);
    for (const char* a : {"--only", "forced", "--repeat", "20"}) args.push_back(a);
    args.push_back(GetParam().scenario);
    DemoRun run = run_demo(args);
    expect_rows_ok(run, GetParam().scenario, "forced", 20);
}

INSTANTIATE_TEST_SUITE_P(EveryScenario, ForcedInterleavings, ::testing::ValuesIn(race_cases(false)), case_name);

class LoadRuns : public DemoTest, public ::testing::WithParamInterface<Case> {};

TEST_P(LoadRuns, ShortSeededRunKeepsEveryProtection) {
    auto args = placement(GetParam().processes);
    for (const char* a : {"--only", "load", "--iterations", "60", "--seed", "7"}) args.push_back(a);
    args.push_back(GetParam().scenario);
    DemoRun run = run_demo(args);
    expect_rows_ok(run, GetParam().scenario, "load", 0);
}

INSTANTIATE_TEST_SUITE_P(EveryScenario, LoadRuns, ::testing::ValuesIn(race_cases(true)), case_name);

}  // namespace
}  // namespace lockstep::test
