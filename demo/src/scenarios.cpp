#include "scenarios.h"

namespace lockstep::demo {

std::vector<ScenarioInfo>& scenarios() {
    static std::vector<ScenarioInfo> all;
    return all;
}

const ScenarioInfo* find_scenario(const std::string& name) {
    for (const auto& s : scenarios()) {
        if (s.name == name) return &s;
    }
    return nullptr;
}

void register_scenarios() {
    if (!scenarios().empty()) return;
    add_smoke();
    add_oversell();
    add_duplicate_job();
    add_lock_pitfalls();
    add_stale_cache();
    add_stampede();
    add_penetration();
}

}  // namespace lockstep::demo
