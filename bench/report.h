// The table lockstep-bench prints: what was measured (Results, filled by a Google Benchmark
// reporter), how each row turns measurements into "ours / baseline / ratio / target / met"
// (RowMaker), and the printed and JSON forms.
//
// Figures are medians over the repetitions of a benchmark, and ours and its baseline run
// interleaved at random in the same process, so a noisy machine moves both alike; only ratios
// are judged, never absolute times.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

namespace lockstep::bench {

// Every repetition of every benchmark of the run, by the name it was registered under.
class Results {
public:
    void add(const benchmark::BenchmarkReporter::Run& run);

    bool has(const std::string& name) const;
    // The error of a benchmark that failed (SkipWithError), if any repetition did.
    std::optional<std::string> error(const std::string& name) const;
    int repetitions(const std::string& name) const;

    // Median over repetitions of wall seconds per iteration. Throws std::out_of_range if absent.
    double seconds_per_iteration(const std::string& name) const;
    // Median over repetitions of a counter as Google Benchmark finished it (rates are per wall
    // second for UseRealTime / UseManualTime benchmarks, summed over threads).
    double counter(const std::string& name, const std::string& counter) const;
    // Sum, minimum and maximum over repetitions of a counter.
    double counter_sum(const std::string& name, const std::string& counter) const;
    double counter_min(const std::string& name, const std::string& counter) const;
    double counter_max(const std::string& name, const std::string& counter) const;
    // A counter of one repetition (0-based, in the order they ran).
    double counter_at(const std::string& name, const std::string& counter, int repetition) const;

    nlohmann::json to_json() const;

private:
    const std::vector<benchmark::BenchmarkReporter::Run>& runs(const std::string& name) const;
    std::vector<double> counter_values(const std::string& name, const std::string& counter) const;
    std::map<std::string, std::vector<benchmark::BenchmarkReporter::Run>> runs_;
    std::map<std::string, std::string> errors_;
};

enum class Verdict { Met, Missed, Shown, NotBuilt, NotRun, Failed };
std::string to_string(Verdict v);

struct TableRow {
    std::string benchmark;
    std::string ours;
    std::string baseline;
    std::string ratio;
    std::string target;
    Verdict verdict = Verdict::Shown;
    std::string notes;
    nlohmann::json data = nlohmann::json::object();  // the numbers behind the row, for --json
};

using RowMaker = std::function<TableRow(const Results&)>;

// The rows of the table, in the order of the issue. A maker whose benchmarks did not run (a
// --benchmark_filter, an error) yields a "not run" / "failed" row instead of throwing.
class Plan {
public:
    void add(int order, std::string benchmark, std::string target, std::vector<std::string> needs,
             RowMaker maker);
    // A row whose benchmarks were not compiled in (their layer is not built yet).
    void add_not_built(int order, std::string benchmark, std::string target, std::string why);
    std::vector<TableRow> rows(const Results& results) const;

private:
    struct Entry {
        int order;
        std::string benchmark;
        std::string target;
        std::vector<std::string> needs;  // benchmark names the maker reads
        RowMaker maker;                  // null: not built
        std::string why;
    };
    std::vector<Entry> entries_;
};

struct Machine {
    int cores = 0;
    std::string cpu;
    std::string redis_version;
    std::string mariadb_version;
    bool private_servers = true;
    bool quick = false;
    std::string date;
    double load_average = 0;  // 1-minute load average at the end of the run
    double load_start = 0;    // ... and at its start
    int load_threads = 0;     // --load N: busy threads run beside the benchmarks
    double load_cores = 0;    // ... and the CPU they got during this run, in cores
};

// --runs N: the whole table N times. Each row's ratio across the runs: median and range, and in
// how many runs its target was met, so that a met target can be told from a lucky run.
struct RunOfTable {
    Machine machine;  // load at start and end of this run
    std::vector<TableRow> rows;
    nlohmann::json benchmarks;  // every repetition (Results::to_json)
};

struct SummaryRow {
    std::string benchmark;
    std::string target;
    std::vector<double> ratios;  // one per run that produced a numeric ratio
    double median = 0, min = 0, max = 0;
    int met = 0, missed = 0, runs = 0;
    Verdict verdict = Verdict::Shown;  // of the median ratio (of the verdicts when no ratio)
};

// Rows are matched by position (every run has the same rows in the same order).
std::vector<SummaryRow> summarize(const std::vector<RunOfTable>& runs);
void print_summary(std::ostream& out, const std::vector<RunOfTable>& runs, const std::vector<SummaryRow>& rows);
nlohmann::json to_json(const std::vector<RunOfTable>& runs, const std::vector<SummaryRow>& summary);

void print_table(std::ostream& out, const Machine& machine, const std::vector<TableRow>& rows);
nlohmann::json to_json(const Machine& machine, const std::vector<TableRow>& rows, const Results& results);

// Formatting helpers for the makers.
std::string micros(double seconds);                            // "61.3 µs"
std::string per_second(double rate, const std::string& unit);  // "12,345 orders/s"
std::string times(double ratio);                               // "1.04×"
std::string fixed(double v, int digits);
// "6.9k–7.8k": the range of a counter over the repetitions, for the notes of throughput rows.
std::string spread(const Results& r, const std::string& name, const std::string& counter);

// Ours and baseline are rates (a counter); ratio = ours/base; met when ratio >= min_ratio
// (or shown when min_ratio is 0).
TableRow rate_row(const Results& r, const std::string& ours, const std::string& baseline,
                  const std::string& counter, double min_ratio, const std::string& unit);

}  // namespace lockstep::bench
