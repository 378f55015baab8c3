// The race catalogue: one RaceCase per race (or per race a scenario shows in its own way), and
// the registry that holds them. A race case says what it forces, who the actors are, every row it
// reports with the outcome each protection must show, and its load variant; the demo runs it,
// --list prints it, --list --json hands it to tests/demo, and docs/races.md describes it.
//
// The expected outcomes exist here ONCE: a case's `rows`. A run asks ctx.row(case, protection,
// mode) for the Result to fill, which carries the expected outcome from the registry (and is
// empty when --race/--protection/--only leave that row out).
//
// Adding a race: one file (demo/src/race_<id>.cpp or next to its scenario) defining
// `void add_race_<id>()` that calls add_race(), and one line LOCKSTEP_DEMO_RACE(add_race_<id>)
// in demo/src/races.def. docs/demo.md shows an example.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "result.h"

namespace lockstep::demo {

class DemoContext;

// One row a race case reports: the protection (or its absence), forced or load, and the outcome
// it must show (reproduced: the protection is not meant to close the race).
struct ExpectedRow {
    std::string protection;
    Mode mode = Mode::Forced;
    Outcome expected = Outcome::Prevented;
};

struct RaceCase {
    // The scenario whose table shows the rows ("stale-cache").
    std::string scenario;
    // The docs/races.md id shown in the rows ("C2"; "C1-C4" for a load run judging four at once).
    std::string race;
    // What the forced interleaving makes happen, one sentence (the timeline is in docs/races.md).
    std::string forces;
    // The actors, in the order they start ("R: reads v1, stops before its backfill").
    std::vector<std::string> roles;
    // The load variant in one sentence; empty when the race is only forced.
    std::string load;
    // Every row, in the order they run.
    std::vector<ExpectedRow> rows;
    // Runs the forced rows / the load rows (each row through ctx.row()). Either may be empty.
    std::function<void(DemoContext&, const RaceCase&)> run_forced;
    std::function<void(DemoContext&, const RaceCase&)> run_load;

    // The registered row, or nullptr.
    const ExpectedRow* find(const std::string& protection, Mode mode) const;
    bool has(Mode mode) const;
};

// Every race case, in registration order (races.def).
std::vector<RaceCase>& race_cases();
void add_race(RaceCase c);
// The cases of one scenario, in order.
std::vector<const RaceCase*> cases_of(const std::string& scenario);

// The ids a row's race names: "O1" -> {O1}; "C1-C4" -> {C1, C2, C3, C4}.
std::vector<std::string> race_ids(const std::string& race);

// The registry as JSON (--list --json): one object per case with scenario, race, forces, roles,
// load and rows [{protection, mode, expected}].
nlohmann::ordered_json registry_json();

}  // namespace lockstep::demo
