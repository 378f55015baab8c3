// The command line of lockstep-demo, parsed once in main.cpp and read by every scenario.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::demo {

struct DemoOptions {
    // Scenarios to run, by name; empty: all of them.
    std::vector<std::string> scenarios;
    // Worker threads (per worker process with --processes).
    int threads = 4;
    // Worker processes; 0 runs every worker as a thread of the demo process itself.
    int processes = 0;
    // Size of the load runs (orders, reads and writes, job rounds: each scenario says which).
    int iterations = 200;
    // Seed of every random choice of the load runs.
    std::uint64_t seed = 1;
    // How often each forced interleaving is repeated (each repetition must reproduce).
    int repeat = 1;
    // "forced", "load" or empty for both.
    std::string only;
    // --race ID…: only the rows of these docs/races.md ids (empty: every race).
    std::vector<std::string> races;
    // --protection TEXT…: only the rows whose protection contains one of these (case-insensitive).
    std::vector<std::string> protections;
    // --html target: a file name, or empty.
    std::string html_path;
    // --json target: a file name, "-" for stdout, or empty.
    std::string json_path;
    // Servers; empty: LOCKSTEP_*_URL, else private servers.
    std::string redis_url;
    std::string mysql_url;

    bool want_forced() const { return only.empty() || only == "forced"; }
    bool want_load() const { return only.empty() || only == "load"; }
    // Total workers of a load run.
    int workers() const { return threads * (processes > 0 ? processes : 1); }
};

}  // namespace lockstep::demo
