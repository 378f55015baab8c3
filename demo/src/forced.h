// Running a forced interleaving --repeat times and turning the trials into one Result.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "context.h"
#include "result.h"

namespace lockstep::demo {

// What one run of a forced interleaving showed.
struct Trial {
    bool reproduced = false;
    std::string evidence;
    std::vector<std::pair<std::string, double>> metrics;
};

// Runs `trial` options().repeat times (argument: the run number) and adds one Result built on
// `base`: observed is "reproduced" when every run reproduced, "prevented" when none did; a mix
// counts as the opposite of what was expected (a forced interleaving must be deterministic).
// An exception from a trial becomes the Result's error. `announce`: say so on stderr (scenarios
// with many short cases announce groups of them instead).
void record_forced(DemoContext& ctx, Result base, const std::function<Trial(int run)>& trial, bool announce = true);

}  // namespace lockstep::demo
