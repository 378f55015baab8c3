// DemoContext: what a scenario runs with: the options, the process's Services, the report,
// progress output, and fresh ids and names so that runs never share rows or keys.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "demo_options.h"
#include "race_case.h"
#include "report.h"
#include "services.h"

namespace lockstep::demo {

class WorkerPool;

class DemoContext {
public:
    DemoContext(const DemoOptions& options, Services& services, Report& report, std::int64_t id_base);
    ~DemoContext();

    const DemoOptions& options() const noexcept { return options_; }
    Services& services() noexcept { return services_; }
    Report& report() noexcept { return report_; }
    // The worker processes (--processes), started on first use.
    WorkerPool& worker_pool();

    // A line on stderr, prefixed with the time since the demo started.
    void progress(std::string_view text) const;
    void add(Result r);

    // Whether the options (--race, --only) select any `mode` row of `c`.
    bool selects(const RaceCase& c, Mode mode) const;
    // The Result of one registered row, with its expected outcome from the registry, for the run
    // to fill and add(); empty when --race/--protection/--only leave the row out. A row missing
    // from the registry comes back with an error (its verdict is FAIL).
    std::optional<Result> row(const RaceCase& c, const std::string& protection, Mode mode) const;

    // The first of `n` product ids no other run or case of this process uses.
    std::int64_t new_ids(int n = 1);
    // A name no other case of this run uses, for signals and lock names ("oversell-3").
    std::string unique(std::string_view what);
    // The range of ids handed out (for cleanup).
    std::int64_t id_base() const noexcept { return id_base_; }
    std::int64_t id_end() const noexcept { return next_id_.load(); }

private:
    const DemoOptions& options_;
    Services& services_;
    Report& report_;
    std::int64_t id_base_;
    std::atomic<std::int64_t> next_id_;
    std::atomic<int> next_name_{0};
    std::unique_ptr<WorkerPool> pool_;
};

// Seconds since the demo process started.
double seconds_since_start();

}  // namespace lockstep::demo
