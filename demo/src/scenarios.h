// The scenario registry: every scenario of the demo (one table of the report), in the order they
// run, with one sentence for --help and --list. A scenario's rows come from its race cases
// (race_case.h); the docs/races.md ids it covers are read from them. Scenarios and race cases are
// listed once, in races.def.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "race_case.h"

namespace lockstep::demo {

class DemoContext;

struct ScenarioInfo {
    std::string name;
    // One sentence: what it shows.
    std::string summary;
    // Runs after the forced rows of its cases (e.g. a summary matrix under the table); optional.
    std::function<void(DemoContext&)> after_forced;

    // The docs/races.md ids of its cases, e.g. "O1, O3".
    std::string races() const;
    // Runs its race cases that the options select: every forced part, after_forced, every load part.
    void run(DemoContext& ctx) const;
};

std::vector<ScenarioInfo>& scenarios();
const ScenarioInfo* find_scenario(const std::string& name);
void add_scenario(ScenarioInfo s);

// Fills scenarios(), race_cases() and roles() from races.def (idempotent).
void register_scenarios();

}  // namespace lockstep::demo
