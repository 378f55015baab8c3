// lockstep-demo: reproduces the races of docs/races.md against real Redis and MariaDB, each with and
// without its protection, and measures what each protection costs. See docs/demo.md.
#include <strings.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <string>

#include <CLI/CLI.hpp>

#include "context.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/servers/demo_schema.h"
#include "lockstep/servers/local_servers.h"
#include "html_report.h"
#include "report.h"
#include "scenarios.h"
#include "race_o4.h"
#include "workers.h"

namespace {

using namespace lockstep;
using namespace lockstep::demo;

std::string scenario_help() {
    std::string text = "Scenarios (default: all, in this order):\n";
    for (const auto& s : scenarios()) {
        text += "  " + s.name + std::string(s.name.size() < 14 ? 14 - s.name.size() : 1, ' ') + "[" + s.races() +
                "] " + s.summary + "\n";
    }
    text +=
        "\nEach race is first forced (fault points and barriers make it happen every time), then run under\n"
        "seeded random load. Exit status: 0 when every protection held, 1 when one did not or a run broke.\n"
        "Without --redis/--mysql (or LOCKSTEP_REDIS_URL/LOCKSTEP_MYSQL_URL) private servers are started.";
    return text;
}

bool env_set(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0';
}

// Removes the rows and keys this run created, so an external server is left as it was.
void clean_up(DemoContext& ctx) {
    auto& db = ctx.services().db();
    db.execute("DELETE FROM orders WHERE product_id >= ? AND product_id < ?", {ctx.id_base(), ctx.id_end()});
    db.execute("DELETE FROM products WHERE id >= ? AND id < ?", {ctx.id_base(), ctx.id_end()});
    auto& redis = ctx.services().redis();
    std::string cursor = "0";
    do {
        auto reply = redis.command({"SCAN", cursor, "MATCH", ctx.services().prefix() + "*", "COUNT", "1000"});
        cursor = reply.elements()[0].str();
        std::vector<std::string> keys;
        for (const auto& k : reply.elements()[1].elements()) keys.push_back(k.str());
        if (!keys.empty()) redis.del(keys);
    } while (cursor != "0");
}

// --list: every scenario, then each of its race cases with what it forces and its rows.
int list_registry(const DemoOptions& options) {
    if (!options.json_path.empty()) {
        std::string text = registry_json().dump(2) + "\n";
        if (options.json_path == "-") {
            std::cout << text;
        } else {
            std::ofstream f(options.json_path);
            f << text;
            if (!f) return 2;
        }
        return 0;
    }
    for (const auto& s : scenarios()) {
        const std::string races = s.races();
        std::cout << s.name << std::string(s.name.size() < 14 ? 14 - s.name.size() : 1, ' ') << races
                  << std::string(races.size() < 24 ? 24 - races.size() : 1, ' ') << s.summary << "\n";
        for (const RaceCase* c : cases_of(s.name)) {
            std::cout << "    " << c->race << std::string(c->race.size() < 6 ? 6 - c->race.size() : 1, ' ') << c->forces
                      << "\n";
            for (const auto& r : c->rows) {
                std::cout << "          " << to_string(r.mode) << "  " << r.protection << "  -> " << to_string(r.expected)
                          << "\n";
            }
        }
    }
    return 0;
}

int run(const DemoOptions& options) {
    std::random_device rd;
    char prefix[32];
    std::snprintf(prefix, sizeof prefix, "lsdemo-%08x:", static_cast<unsigned>(rd()));
    const std::int64_t id_base = 1'000'000'000LL * (1 + static_cast<std::int64_t>(rd() % 1'000'000));

    std::unique_ptr<LocalServers> servers;
    Endpoints endpoints{options.redis_url, options.mysql_url};
    if (endpoints.redis_url.empty() || endpoints.mysql_url.empty()) {
        LocalServersOptions so;
        so.redis = endpoints.redis_url.empty();
        so.mysql = endpoints.mysql_url.empty();
        so.mysql_replica = so.mysql && !env_set("LOCKSTEP_MYSQL_URL");  // C10's replica
        bool private_redis = so.redis && !env_set("LOCKSTEP_REDIS_URL");
        bool private_mysql = so.mysql && !env_set("LOCKSTEP_MYSQL_URL");
        if (private_redis || private_mysql) {
            std::cerr << "[0.0s] starting private " << (private_redis ? "redis-server" : "")
                      << (private_redis && private_mysql ? " and " : "") << (private_mysql ? "mariadbd" : "")
                      << " (use --redis/--mysql or LOCKSTEP_REDIS_URL/LOCKSTEP_MYSQL_URL for your own)\n";
        }
        servers = std::make_unique<LocalServers>(so);
        if (so.redis) endpoints.redis_url = servers->redis_url();
        if (so.mysql) endpoints.mysql_url = servers->mysql_url();
        if (servers->has_mysql_replica()) endpoints.mysql_replica_url = servers->mysql_replica_url();
    }

    Services services(endpoints, prefix, options.workers() + 4);
    lockstep::testing::bootstrap_demo_schema(services.db());
    Report report;
    DemoContext ctx(options, services, report, id_base);

    std::vector<const ScenarioInfo*> chosen;
    for (const auto& name : options.scenarios) chosen.push_back(find_scenario(name));
    if (chosen.empty()) {
        for (const auto& s : scenarios()) chosen.push_back(&s);
    }
    // --race / --only: a scenario none of whose cases is selected prints no table.
    std::erase_if(chosen, [&](const ScenarioInfo* s) {
        for (const RaceCase* c : cases_of(s->name)) {
            if (ctx.selects(*c, Mode::Forced) || ctx.selects(*c, Mode::Load)) return false;
        }
        return true;
    });
    const bool json_to_stdout = options.json_path == "-";
    std::ostream& tables = json_to_stdout ? std::cerr : std::cout;
    for (const ScenarioInfo* s : chosen) {
        ctx.progress("scenario " + s->name + " (" + s->races() + ")");
        try {
            s->run(ctx);
        } catch (const std::exception& e) {
            Result r = make_result(s->name, s->races(), "-", Mode::Forced, Outcome::Prevented);
            r.error = std::string("the scenario broke: ") + e.what();
            ctx.add(std::move(r));
        }
        Report::print_table(tables, s->name + " (" + s->races() + ")", report.results_of(s->name));
        for (const auto& note : report.notes_of(s->name)) tables << "\n" << note;
        tables.flush();
    }
    try {
        clean_up(ctx);
    } catch (const std::exception& e) {
        std::cerr << "cleanup failed (rows and keys of this run may remain): " << e.what() << "\n";
    }

    auto all = report.results();
    int failed = 0;
    for (const auto& r : all) failed += passed(r) ? 0 : 1;
    tables << "\n" << all.size() << " results: " << all.size() - failed << " ok, " << failed << " FAIL"
           << " (seed " << options.seed << ", " << options.workers() << " workers"
           << (options.processes > 0 ? " in " + std::to_string(options.processes) + " processes" : " as threads")
           << ")\n";
    if (!options.html_path.empty()) {
        std::ofstream f(options.html_path);
        write_html(f, report, options);
        if (!f) {
            std::cerr << "cannot write " << options.html_path << "\n";
            return 2;
        }
    }
    if (!options.json_path.empty()) {
        std::string text = report.to_json().dump(2) + "\n";
        if (json_to_stdout) {
            std::cout << text;
        } else {
            std::ofstream f(options.json_path);
            f << text;
            if (!f) {
                std::cerr << "cannot write " << options.json_path << "\n";
                return 2;
            }
        }
    }
    return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    // The library's own warnings (a lock lost on purpose, a delete retried) are part of the
    // races the demo provokes; the tables report them. LOCKSTEP_LOG_LEVEL brings them back.
    if (!env_set("LOCKSTEP_LOG_LEVEL")) lockstep::logger()->set_level(spdlog::level::err);
    register_scenarios();
    if (argc >= 2 && std::string(argv[1]) == "__worker") return worker_main();
    if (argc >= 2 && std::string(argv[1]) == "__o4-holder") return o4_holder_main();

    DemoOptions options;
    bool list = false;
    CLI::App app{"lockstep-demo: reproduces the races of docs/races.md against real Redis and MariaDB, with and "
                 "without each protection, and measures what each protection costs."};
    app.footer(scenario_help());
    app.add_option("scenario", options.scenarios, "Scenarios to run (default: all)");
    app.add_option("--threads", options.threads, "Worker threads (per worker process with --processes)")
        ->check(CLI::Range(1, 256))
        ->capture_default_str();
    app.add_option("--processes", options.processes,
                   "Run the workers in N separate processes, each with its own pools and lock client "
                   "(0: threads of this process)")
        ->check(CLI::Range(0, 64))
        ->capture_default_str();
    app.add_option("--iterations", options.iterations, "Size of each load run (orders, operations, rounds)")
        ->check(CLI::Range(1, 10'000'000))
        ->capture_default_str();
    app.add_option("--seed", options.seed, "Seed of the random load runs")->capture_default_str();
    app.add_option("--repeat", options.repeat, "Run each forced interleaving N times; each must reproduce")
        ->check(CLI::Range(1, 1000))
        ->capture_default_str();
    app.add_option("--only", options.only, "Run only the forced interleavings or only the load runs")
        ->check(CLI::IsMember({"forced", "load"}));
    app.add_option("--json", options.json_path, "Write the results as JSON to FILE ('-': stdout)");
    app.add_option("--redis", options.redis_url, "Redis URL (default: LOCKSTEP_REDIS_URL, else a private server)");
    app.add_option("--mysql", options.mysql_url, "MySQL URL (default: LOCKSTEP_MYSQL_URL, else a private server)");
    app.add_option("--race", options.races, "Only the rows of these docs/races.md ids (e.g. --race C2 --race O1)");
    app.add_option("--protection", options.protections,
                   "Only the rows whose protection contains this text (case-insensitive, e.g. Lease)");
    app.add_option("--html", options.html_path, "Also write the report as one self-contained HTML page to FILE");
    app.add_flag("--list", list,
                 "List the scenarios, their race cases and protections (from the registry) and exit; "
                 "with --json, the registry as JSON");
    CLI11_PARSE(app, argc, argv);

    if (list) return list_registry(options);
    for (const auto& id : options.races) {
        bool known = false;
        for (const auto& c : race_cases()) {
            for (const auto& r : race_ids(c.race)) known = known || r == id || (id.size() == r.size() && strcasecmp(id.c_str(), r.c_str()) == 0);
        }
        if (!known) {
            std::cerr << "unknown race '" << id << "' (see --list)\n";
            return 2;
        }
    }
    for (const auto& name : options.scenarios) {
        if (!find_scenario(name)) {
            std::cerr << "unknown scenario '" << name << "' (see --list)\n";
            return 2;
        }
    }
    try {
        return run(options);
    } catch (const std::exception& e) {
        std::cerr << "lockstep-demo: " << e.what() << "\n";
        return 2;
    }
}
