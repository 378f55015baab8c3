#include "scenarios.h"

#include <algorithm>

#include "context.h"

#define LOCKSTEP_DEMO_SCENARIO(fn) void fn();
#define LOCKSTEP_DEMO_RACE(fn) void fn();
namespace lockstep::demo {
#include "races.def"
}  // namespace lockstep::demo
#undef LOCKSTEP_DEMO_SCENARIO
#undef LOCKSTEP_DEMO_RACE

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

void add_scenario(ScenarioInfo s) { scenarios().push_back(std::move(s)); }

std::string ScenarioInfo::races() const {
    std::vector<std::string> ids;
    for (const RaceCase* c : cases_of(name)) {
        // "C1-C4" (a load run judging C1..C4 at once) adds no id of its own.
        if (c->race.find('-') != std::string::npos && c->race.size() > 1) continue;
        if (std::find(ids.begin(), ids.end(), c->race) == ids.end()) ids.push_back(c->race);
    }
    std::string text;
    for (const auto& id : ids) text += (text.empty() ? "" : ", ") + id;
    return text.empty() ? "-" : text;
}

void ScenarioInfo::run(DemoContext& ctx) const {
    const auto cases = cases_of(name);
    bool forced_any = false;
    if (ctx.options().want_forced()) {
        for (const RaceCase* c : cases) {
            if (c->run_forced && ctx.selects(*c, Mode::Forced)) {
                c->run_forced(ctx, *c);
                forced_any = true;
            }
        }
        if (forced_any && after_forced) after_forced(ctx);
    }
    if (ctx.options().want_load()) {
        for (const RaceCase* c : cases) {
            if (c->run_load && ctx.selects(*c, Mode::Load)) c->run_load(ctx, *c);
        }
    }
}

void register_scenarios() {
    if (!scenarios().empty()) return;
#define LOCKSTEP_DEMO_SCENARIO(fn) fn();
#define LOCKSTEP_DEMO_RACE(fn)
#include "races.def"
#undef LOCKSTEP_DEMO_SCENARIO
#undef LOCKSTEP_DEMO_RACE
#define LOCKSTEP_DEMO_SCENARIO(fn)
#define LOCKSTEP_DEMO_RACE(fn) fn();
#include "races.def"
#undef LOCKSTEP_DEMO_SCENARIO
#undef LOCKSTEP_DEMO_RACE
}

}  // namespace lockstep::demo
