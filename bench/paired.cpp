#include "paired.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

#include "environment.h"

namespace lockstep::bench {

namespace {
double median_of(std::vector<double>& v) {
    if (v.empty()) return 0;
    auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
    std::nth_element(v.begin(), mid, v.end());
    return *mid;
}
}  // namespace

void run_paired(benchmark::State& state, const std::vector<TimedOp>& ops) {
    using Clock = std::chrono::steady_clock;
    const std::size_t n = ops.size();
    std::vector<std::vector<double>> samples(n);
    std::size_t rotation = 0;
    std::string error;
    for (auto _ : state) {
        for (std::size_t j = 0; j < n; ++j) {
            const std::size_t i = (rotation + j) % n;
            const auto t0 = Clock::now();
            try {
                ops[i].call();
            } catch (const std::exception& e) {
                // Keep the loop whole (Google Benchmark expects it to run out); report after it.
                if (error.empty()) error = ops[i].name + ": " + e.what();
            }
            const auto t1 = Clock::now();
            samples[i].push_back(std::chrono::duration<double>(t1 - t0).count());
        }
        ++rotation;
    }
    if (!error.empty()) {
        state.SkipWithError(error.c_str());
        return;
    }
    for (std::size_t i = 0; i < n; ++i) {
        auto& s = samples[i];
        const double mean =
            s.empty() ? 0 : std::accumulate(s.begin(), s.end(), 0.0) / static_cast<double>(s.size());
        state.counters[ops[i].name + "_mean_s"] = mean;
        state.counters[ops[i].name + "_median_s"] = median_of(s);
    }
}

benchmark::internal::Benchmark* register_paired(const std::string& name, const Budget& budget,
                                                std::function<std::vector<TimedOp>()> make_ops,
                                                std::function<void()> after) {
    return benchmark::RegisterBenchmark(name.c_str(),
                                        [make_ops = std::move(make_ops), after = std::move(after)](benchmark::State& state) {
                                            try {
                                                run_paired(state, make_ops());
                                                if (after) after();
                                            } catch (const std::exception& e) {
                                                state.SkipWithError(e.what());
                                            }
                                        })
        ->Unit(benchmark::kMicrosecond)
        ->MinTime(budget.latency_min_time)
        ->Repetitions(budget.latency_repetitions);
}

MedianRepetition::MedianRepetition(const Results& r, std::string benchmark, const std::string& ours,
                                   const std::string& baseline)
    : results_(r), benchmark_(std::move(benchmark)) {
    const int n = r.repetitions(benchmark_);
    if (n == 0) throw std::out_of_range("benchmark '" + benchmark_ + "' did not run");
    for (int i = 0; i < n; ++i) {
        const double b = r.counter_at(benchmark_, baseline + "_median_s", i);
        ratios_.push_back(b > 0 ? r.counter_at(benchmark_, ours + "_median_s", i) / b : 0);
    }
    std::vector<std::size_t> order(ratios_.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return ratios_[a] < ratios_[b]; });
    index_ = order[(order.size() - 1) / 2];
}

double MedianRepetition::seconds(const std::string& op) const {
    return counter(op + "_median_s");
}

double MedianRepetition::counter(const std::string& name) const {
    return results_.counter_at(benchmark_, name, static_cast<int>(index_));
}

TableRow paired_latency_row(const MedianRepetition& m, const std::string& ours, const std::string& baseline,
                            double max_ratio, const std::string& what_ours,
                            const std::string& what_baseline) {
    const double a = m.seconds(ours);
    const double b = m.seconds(baseline);
    TableRow row;
    row.ours = micros(a) + " " + what_ours;
    row.baseline = micros(b) + " " + what_baseline;
    row.ratio = times(m.ratio());
    row.verdict = m.ratio() <= max_ratio ? Verdict::Met : Verdict::Missed;
    row.data = {{"ours_median_seconds", a},
                {"baseline_median_seconds", b},
                {"ours_mean_seconds", m.counter(ours + "_mean_s")},
                {"baseline_mean_seconds", m.counter(baseline + "_mean_s")},
                {"ratio", m.ratio()},
                {"ratio_per_repetition", m.ratios()},
                {"max_ratio", max_ratio}};
    return row;
}

}  // namespace lockstep::bench
