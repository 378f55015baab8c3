// The demo's report: the results of every scenario, printed as one table per scenario and
// written as JSON (--json). Thread-safe: workers may add results from any thread.
#pragma once

#include <iosfwd>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "result.h"

namespace lockstep::demo {

class Report {
public:
    void add(Result r);
    std::vector<Result> results() const;
    std::vector<Result> results_of(const std::string& scenario) const;

    // True when every result passed (and there is at least one).
    bool all_passed() const;

    // A few lines printed under a scenario's table (e.g. a summary matrix).
    void add_note(const std::string& scenario, std::string text);
    std::vector<std::string> notes_of(const std::string& scenario) const;

    // One table: race, protection, mode, expected, observed, verdict, evidence, cost.
    static void print_table(std::ostream& out, const std::string& title, const std::vector<Result>& results);
    // Every result as the JSON array --json writes.
    nlohmann::ordered_json to_json() const;

private:
    mutable std::mutex mutex_;
    std::vector<Result> results_;
    std::vector<std::pair<std::string, std::string>> notes_;
};

// Fields in a fixed, readable order: scenario, race, protection, mode, expected, observed,
// verdict, evidence, cost, metrics (and error when the run broke).
nlohmann::ordered_json to_json(const Result& r);

}  // namespace lockstep::demo
