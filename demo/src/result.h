// One line of the demo's report: one race, one protection, one way of running it (a forced
// interleaving or a load run), what was expected, what was measured, and the verdict.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lockstep::demo {

enum class Mode { Forced, Load };
enum class Outcome { Reproduced, Prevented };

std::string_view to_string(Mode m) noexcept;
std::string_view to_string(Outcome o) noexcept;

struct Result {
    std::string scenario;
    // docs/races.md id(s), e.g. "O1" or "O1, O3".
    std::string race;
    // What guarded the run: "none", "SELECT ... FOR UPDATE", "RedisMutex", ...
    std::string protection;
    Mode mode = Mode::Forced;
    Outcome expected = Outcome::Prevented;
    Outcome observed = Outcome::Prevented;
    // What was seen, in a few words ("2 sold of 1 in stock").
    std::string evidence;
    // What the protection cost, in a few words ("1840 orders/s, p99 4.1 ms"); empty for forced runs.
    std::string cost;
    // Every number measured, in the order measured.
    std::vector<std::pair<std::string, double>> metrics;
    // Set when the run itself broke (an exception); the verdict is then FAIL.
    std::string error;

    Result& metric(std::string name, double value) {
        metrics.emplace_back(std::move(name), value);
        return *this;
    }
};

// ok, or FAIL. A protection that let the race through fails; so does a forced interleaving that
// did not reproduce (the forcing is broken) and a run that threw. A load run without protection
// in which the race happened not to occur is not a failure: random runs promise nothing.
bool passed(const Result& r) noexcept;

}  // namespace lockstep::demo

namespace lockstep::demo {

// A result with its identity filled in; the run fills observed, evidence, cost and metrics.
inline Result make_result(std::string scenario, std::string race, std::string protection, Mode mode,
                          Outcome expected) {
    Result r;
    r.scenario = std::move(scenario);
    r.race = std::move(race);
    r.protection = std::move(protection);
    r.mode = mode;
    r.expected = expected;
    return r;
}

}  // namespace lockstep::demo
