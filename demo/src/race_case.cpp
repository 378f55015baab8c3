#include "race_case.h"

#include "scenarios.h"

namespace lockstep::demo {

const ExpectedRow* RaceCase::find(const std::string& protection, Mode mode) const {
    for (const auto& r : rows) {
        if (r.protection == protection && r.mode == mode) return &r;
    }
    return nullptr;
}

bool RaceCase::has(Mode mode) const {
    for (const auto& r : rows) {
        if (r.mode == mode) return true;
    }
    return false;
}

std::vector<std::string> race_ids(const std::string& race) {
    const auto dash = race.find('-');
    if (dash == std::string::npos || dash == 0 || dash + 1 >= race.size()) return {race};
    const std::string a = race.substr(0, dash), b = race.substr(dash + 1);
    const auto da = a.find_first_of("0123456789"), db = b.find_first_of("0123456789");
    if (da == std::string::npos || db == std::string::npos || a.substr(0, da) != b.substr(0, db)) return {race};
    std::vector<std::string> out;
    const int from = std::stoi(a.substr(da)), to = std::stoi(b.substr(db));
    for (int i = from; i <= to && i - from < 100; ++i) out.push_back(a.substr(0, da) + std::to_string(i));
    return out;
}

std::vector<RaceCase>& race_cases() {
    static std::vector<RaceCase> all;
    return all;
}

void add_race(RaceCase c) { race_cases().push_back(std::move(c)); }

std::vector<const RaceCase*> cases_of(const std::string& scenario) {
    std::vector<const RaceCase*> out;
    for (const auto& c : race_cases()) {
        if (c.scenario == scenario) out.push_back(&c);
    }
    return out;
}

nlohmann::ordered_json registry_json() {
    nlohmann::ordered_json all = nlohmann::ordered_json::array();
    for (const auto& s : scenarios()) {
        for (const RaceCase* c : cases_of(s.name)) {
            nlohmann::ordered_json rows = nlohmann::ordered_json::array();
            for (const auto& r : c->rows) {
                rows.push_back({{"protection", r.protection},
                                {"mode", std::string(to_string(r.mode))},
                                {"expected", std::string(to_string(r.expected))}});
            }
            all.push_back({{"scenario", c->scenario},
                           {"race", c->race},
                           {"forces", c->forces},
                           {"roles", c->roles},
                           {"load", c->load},
                           {"rows", rows}});
        }
    }
    return all;
}

}  // namespace lockstep::demo
