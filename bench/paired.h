// Paired timing for the latency rows. On a shared, noisy machine two benchmarks run one after
// the other see different machines; so ours and its baseline run call by call in the same loop
// instead: every iteration calls each operation once, in an order that rotates from one
// iteration to the next, and times each call on its own. A burst of noise hits both alike, and
// the per-call medians ignore the calls that a preemption stretched.
//
// Counters set (per operation `name`): `<name>_median_s` and `<name>_mean_s`, seconds per call.
//
// Thread safety: a benchmark's body runs on one thread; the functions keep no state of their own.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "report.h"

namespace lockstep::bench {

struct TimedOp {
    std::string name;
    std::function<void()> call;
};

struct Budget;

void run_paired(benchmark::State& state, const std::vector<TimedOp>& ops);

// Registers the paired latency benchmark `name`: each run builds its operations with `make_ops`
// (which may do setup of its own first), runs them paired, then calls `after` (if any); an
// exception from any of them skips the run with its message. In microseconds, with the budget's
// latency min time and repetitions.
benchmark::internal::Benchmark* register_paired(const std::string& name, const Budget& budget,
                                                std::function<std::vector<TimedOp>()> make_ops,
                                                std::function<void()> after = {});

// The repetition of a paired benchmark whose ours/baseline ratio is the median over its
// repetitions. A paired row reads every figure from it, so that its columns, its ratio and the
// arithmetic in its notes agree with each other. (Latency families run an odd number of
// repetitions; with an even number it is the lower of the two middle ones.)
class MedianRepetition {
public:
    MedianRepetition(const Results& r, std::string benchmark, const std::string& ours,
                     const std::string& baseline);

    // <op>_median_s of that repetition: seconds per call.
    double seconds(const std::string& op) const;
    // Any counter of that repetition.
    double counter(const std::string& name) const;
    double ratio() const { return ratios_[index_]; }
    // Every repetition's ratio, in the order they ran.
    const std::vector<double>& ratios() const { return ratios_; }

private:
    const Results& results_;
    std::string benchmark_;
    std::vector<double> ratios_;
    std::size_t index_ = 0;
};

// The row of a paired latency comparison: met when the ratio <= max_ratio.
TableRow paired_latency_row(const MedianRepetition& m, const std::string& ours, const std::string& baseline,
                            double max_ratio, const std::string& what_ours, const std::string& what_baseline);

}  // namespace lockstep::bench
