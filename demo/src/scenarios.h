// The scenario registry: every scenario of the demo, in the order they run, with the RACES.md
// ids it covers and one sentence for --help and --list. Each scenario lives in its own file and
// adds itself (and its worker roles, workers.h) through one add_* function called from
// register_scenarios().
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace lockstep::demo {

class DemoContext;

struct ScenarioInfo {
    std::string name;
    // RACES.md ids, e.g. "O1, O3".
    std::string races;
    // One sentence: what it shows.
    std::string summary;
    std::function<void(DemoContext&)> run;
};

std::vector<ScenarioInfo>& scenarios();
const ScenarioInfo* find_scenario(const std::string& name);

// Fills scenarios() and roles() (idempotent).
void register_scenarios();

// One per scenario file.
void add_smoke();
void add_oversell();
void add_duplicate_job();
void add_lock_pitfalls();
void add_stale_cache();
void add_stampede();
void add_penetration();

}  // namespace lockstep::demo
