#include "report.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <sstream>
#include <stdexcept>

namespace lockstep::bench {

namespace {

double median(std::vector<double> v) {
    if (v.empty()) throw std::out_of_range("no values");
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Display width of UTF-8 text: code points, not bytes (µ, ×, ≤ are one column each).
std::size_t width(const std::string& s) {
    std::size_t w = 0;
    for (unsigned char c : s) {
        if ((c & 0xC0) != 0x80) ++w;
    }
    return w;
}

std::string pad(const std::string& s, std::size_t w) {
    return s + std::string(w > width(s) ? w - width(s) : 0, ' ');
}

}  // namespace

void Results::add(const benchmark::BenchmarkReporter::Run& run) {
    if (run.run_type != benchmark::BenchmarkReporter::Run::RT_Iteration) return;
    const std::string& name = run.run_name.function_name;
    if (run.error_occurred) {
        errors_[name] = run.error_message;
        return;
    }
    runs_[name].push_back(run);
}

bool Results::has(const std::string& name) const {
    return runs_.count(name) > 0;
}

std::optional<std::string> Results::error(const std::string& name) const {
    auto it = errors_.find(name);
    if (it == errors_.end()) return std::nullopt;
    return it->second;
}

int Results::repetitions(const std::string& name) const {
    auto it = runs_.find(name);
    return it == runs_.end() ? 0 : static_cast<int>(it->second.size());
}

const std::vector<benchmark::BenchmarkReporter::Run>& Results::runs(const std::string& name) const {
    auto it = runs_.find(name);
    if (it == runs_.end() || it->second.empty())
        throw std::out_of_range("benchmark '" + name + "' did not run");
    return it->second;
}

double Results::seconds_per_iteration(const std::string& name) const {
    std::vector<double> v;
    for (const auto& run : runs(name)) {
        v.push_back(run.real_accumulated_time /
                    static_cast<double>(std::max<benchmark::IterationCount>(run.iterations, 1)));
    }
    return median(v);
}

std::vector<double> Results::counter_values(const std::string& name, const std::string& counter) const {
    std::vector<double> v;
    for (const auto& run : runs(name)) {
        auto it = run.counters.find(counter);
        if (it == run.counters.end())
            throw std::out_of_range("benchmark '" + name + "' has no counter " + counter);
        v.push_back(it->second.value);
    }
    return v;
}

double Results::counter(const std::string& name, const std::string& counter) const {
    return median(counter_values(name, counter));
}

double Results::counter_sum(const std::string& name, const std::string& counter) const {
    double sum = 0;
    for (double x : counter_values(name, counter)) sum += x;
    return sum;
}

double Results::counter_min(const std::string& name, const std::string& counter) const {
    auto v = counter_values(name, counter);
    return *std::min_element(v.begin(), v.end());
}

double Results::counter_max(const std::string& name, const std::string& counter) const {
    auto v = counter_values(name, counter);
    return *std::max_element(v.begin(), v.end());
}

double Results::counter_at(const std::string& name, const std::string& counter, int repetition) const {
    return counter_values(name, counter).at(static_cast<std::size_t>(repetition));
}

nlohmann::json Results::to_json() const {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [name, list] : runs_) {
        nlohmann::json reps = nlohmann::json::array();
        for (const auto& run : list) {
            nlohmann::json counters = nlohmann::json::object();
            for (const auto& [k, c] : run.counters) counters[k] = c.value;
            reps.push_back({{"iterations", run.iterations},
                            {"threads", run.threads},
                            {"real_seconds", run.real_accumulated_time},
                            {"seconds_per_iteration",
                             run.real_accumulated_time /
                                 static_cast<double>(std::max<benchmark::IterationCount>(run.iterations, 1))},
                            {"counters", counters}});
        }
        out[name] = {{"repetitions", reps}};
    }
    for (const auto& [name, message] : errors_) out[name]["error"] = message;
    return out;
}

std::string to_string(Verdict v) {
    switch (v) {
        case Verdict::Met:
            return "yes";
        case Verdict::Missed:
            return "NO";
        case Verdict::Shown:
            return "shown";
        case Verdict::NotBuilt:
            return "not built";
        case Verdict::NotRun:
            return "not run";
        case Verdict::Failed:
            return "FAILED";
    }
    return "?";
}

void Plan::add(int order, std::string benchmark, std::string target, std::vector<std::string> needs,
               RowMaker maker) {
    entries_.push_back(
        {order, std::move(benchmark), std::move(target), std::move(needs), std::move(maker), {}});
}

void Plan::add_not_built(int order, std::string benchmark, std::string target, std::string why) {
    entries_.push_back({order, std::move(benchmark), std::move(target), {}, nullptr, std::move(why)});
}

std::vector<TableRow> Plan::rows(const Results& results) const {
    auto entries = entries_;
    std::stable_sort(entries.begin(), entries.end(),
                     [](const Entry& a, const Entry& b) { return a.order < b.order; });
    std::vector<TableRow> rows;
    for (const auto& e : entries) {
        TableRow row;
        row.benchmark = e.benchmark;
        row.target = e.target;
        if (!e.maker) {
            row.verdict = Verdict::NotBuilt;
            row.notes = e.why;
            rows.push_back(row);
            continue;
        }
        std::string problem;
        for (const auto& need : e.needs) {
            if (auto err = results.error(need)) {
                row.verdict = Verdict::Failed;
                problem += need + ": " + *err + "; ";
            } else if (!results.has(need) && row.verdict != Verdict::Failed) {
                row.verdict = Verdict::NotRun;
                problem += need + " did not run; ";
            }
        }
        if (!problem.empty()) {
            row.notes = problem.substr(0, problem.size() - 2);
            rows.push_back(row);
            continue;
        }
        try {
            TableRow made = e.maker(results);
            made.benchmark = e.benchmark;
            if (made.target.empty()) made.target = e.target;
            rows.push_back(std::move(made));
        } catch (const std::exception& ex) {
            row.verdict = Verdict::Failed;
            row.notes = ex.what();
            rows.push_back(row);
        }
    }
    return rows;
}

void print_table(std::ostream& out, const Machine& m, const std::vector<TableRow>& rows) {
    out << "lockstep-bench" << (m.quick ? " --quick" : "") << ", " << m.date << ": " << m.cores << " cores ("
        << m.cpu << "), load average " << fixed(m.load_start, 2) << " at start, " << fixed(m.load_average, 2)
        << " at end";
    if (m.load_threads > 0)
        out << ", --load " << m.load_threads << ": " << m.load_threads
            << (m.load_threads == 1 ? " busy thread" : " busy threads") << " beside it got " << fixed(m.load_cores, 2)
            << " cores";
    out << ", Redis " << m.redis_version
        << ", MariaDB " << m.mariadb_version
        << (m.private_servers ? " (private servers)" : " (external servers)") << "\n\n";
    const std::vector<std::string> header = {"benchmark", "ours", "baseline", "ratio",
                                             "target",    "met",  "notes"};
    std::vector<std::vector<std::string>> cells;
    for (const auto& r : rows) {
        cells.push_back({r.benchmark, r.ours, r.baseline, r.ratio, r.target, to_string(r.verdict), r.notes});
    }
    std::vector<std::size_t> w(header.size());
    for (std::size_t i = 0; i < header.size(); ++i) w[i] = width(header[i]);
    for (const auto& c : cells) {
        // The notes column is the last: no padding needed, and it may be long.
        for (std::size_t i = 0; i + 1 < c.size(); ++i) w[i] = std::max(w[i], width(c[i]));
    }
    auto line = [&](const std::vector<std::string>& c) {
        out << "|";
        for (std::size_t i = 0; i < c.size(); ++i)
            out << " " << (i + 1 < c.size() ? pad(c[i], w[i]) : c[i]) << " |";
        out << "\n";
    };
    line(header);
    out << "|";
    for (std::size_t i = 0; i < header.size(); ++i)
        out << std::string((i + 1 < header.size() ? w[i] : 5) + 2, '-') << "|";
    out << "\n";
    for (const auto& c : cells) line(c);
    int met = 0, missed = 0, other = 0;
    for (const auto& r : rows) {
        if (r.verdict == Verdict::Met)
            ++met;
        else if (r.verdict == Verdict::Missed)
            ++missed;
        else if (r.verdict != Verdict::Shown)
            ++other;
    }
    out << "\ntargets met: " << met << ", missed: " << missed;
    if (other > 0) out << ", not built / not run / failed: " << other;
    out << "\n";
}

nlohmann::json to_json(const Machine& m, const std::vector<TableRow>& rows, const Results& results) {
    nlohmann::json j;
    j["machine"] = {{"cores", m.cores},
                    {"cpu", m.cpu},
                    {"redis_version", m.redis_version},
                    {"mariadb_version", m.mariadb_version},
                    {"private_servers", m.private_servers},
                    {"load_average", m.load_average},
                    {"load_average_start", m.load_start},
                    {"load_threads", m.load_threads},
                    {"load_threads_cores", m.load_cores},
                    {"date", m.date},
                    {"quick", m.quick}};
    j["rows"] = nlohmann::json::array();
    for (const auto& r : rows) {
        j["rows"].push_back({{"benchmark", r.benchmark},
                             {"ours", r.ours},
                             {"baseline", r.baseline},
                             {"ratio", r.ratio},
                             {"target", r.target},
                             {"met", to_string(r.verdict)},
                             {"notes", r.notes},
                             {"data", r.data}});
    }
    j["benchmarks"] = results.to_json();
    return j;
}

namespace {

// The numeric ratio of a row: data["ratio"] when the maker put it there, else the leading
// number of the ratio column ("1.14×"); NaN when the row has none ("—", not run).
double ratio_of(const TableRow& r) {
    if (r.data.is_object() && r.data.contains("ratio") && r.data["ratio"].is_number())
        return r.data["ratio"].get<double>();
    if (r.ratio.empty() || !(std::isdigit(static_cast<unsigned char>(r.ratio[0])) != 0)) return std::nan("");
    return std::strtod(r.ratio.c_str(), nullptr);
}

// "≤ 1.05×" -> {+1, 1.05}: the ratio must be at most; "≥ 0.8×" -> {-1, 0.8}; else {0, 0}
// (a target on something else than the ratio, "≤ 200 B", is judged per run by the row).
std::pair<int, double> target_of(const std::string& t) {
    const bool at_most = t.find("≤") != std::string::npos;
    const bool at_least = t.find("≥") != std::string::npos;
    if ((!at_most && !at_least) || t.find("×") == std::string::npos) return {0, 0};
    auto digit = t.find_first_of("0123456789");
    if (digit == std::string::npos) return {0, 0};
    return {at_most ? 1 : -1, std::strtod(t.c_str() + digit, nullptr)};
}

}  // namespace

std::vector<SummaryRow> summarize(const std::vector<RunOfTable>& runs) {
    std::vector<SummaryRow> out;
    if (runs.empty()) return out;
    for (std::size_t i = 0; i < runs.front().rows.size(); ++i) {
        SummaryRow s;
        s.benchmark = runs.front().rows[i].benchmark;
        s.target = runs.front().rows[i].target;
        for (const auto& run : runs) {
            if (i >= run.rows.size()) continue;
            const TableRow& r = run.rows[i];
            ++s.runs;
            if (r.verdict == Verdict::Met) ++s.met;
            if (r.verdict == Verdict::Missed) ++s.missed;
            const double x = ratio_of(r);
            if (!std::isnan(x)) s.ratios.push_back(x);
        }
        const auto [direction, bound] = target_of(s.target);
        if (!s.ratios.empty()) {
            s.median = median(s.ratios);
            s.min = *std::min_element(s.ratios.begin(), s.ratios.end());
            s.max = *std::max_element(s.ratios.begin(), s.ratios.end());
        }
        if (!s.ratios.empty() && direction != 0 && s.met + s.missed > 0) {
            const bool ok = direction > 0 ? s.median <= bound : s.median >= bound;
            s.verdict = ok ? Verdict::Met : Verdict::Missed;
        } else if (s.met + s.missed > 0) {
            s.verdict = s.met * 2 > s.runs ? Verdict::Met : Verdict::Missed;
        } else {
            s.verdict = runs.front().rows[i].verdict;
        }
        out.push_back(std::move(s));
    }
    return out;
}

void print_summary(std::ostream& out, const std::vector<RunOfTable>& runs, const std::vector<SummaryRow>& rows) {
    out << "\n" << runs.size() << " runs of the table; load average (start → end) per run:";
    for (const auto& r : runs) out << " " << fixed(r.machine.load_start, 1) << "→" << fixed(r.machine.load_average, 1);
    out << "\n\n";
    const std::vector<std::string> header = {"benchmark", "median ratio", "range", "target", "met (median)",
                                             "met in runs"};
    std::vector<std::vector<std::string>> cells;
    for (const auto& s : rows) {
        const bool judged = s.met + s.missed > 0;
        cells.push_back({s.benchmark, s.ratios.empty() ? "—" : times(s.median),
                         s.ratios.empty() ? "—" : times(s.min) + "–" + times(s.max), s.target,
                         to_string(s.verdict),
                         judged ? std::to_string(s.met) + " of " + std::to_string(s.runs) : "—"});
    }
    std::vector<std::size_t> w(header.size());
    for (std::size_t i = 0; i < header.size(); ++i) w[i] = width(header[i]);
    for (const auto& c : cells)
        for (std::size_t i = 0; i < c.size(); ++i) w[i] = std::max(w[i], width(c[i]));
    auto line = [&](const std::vector<std::string>& c) {
        out << "|";
        for (std::size_t i = 0; i < c.size(); ++i) out << " " << pad(c[i], w[i]) << " |";
        out << "\n";
    };
    line(header);
    out << "|";
    for (std::size_t i = 0; i < header.size(); ++i) out << std::string(w[i] + 2, '-') << "|";
    out << "\n";
    for (const auto& c : cells) line(c);
    int met = 0, missed = 0;
    for (const auto& s : rows) {
        met += s.verdict == Verdict::Met ? 1 : 0;
        missed += s.verdict == Verdict::Missed ? 1 : 0;
    }
    out << "\ntargets met in the median: " << met << ", missed: " << missed << "\n";
}

nlohmann::json to_json(const std::vector<RunOfTable>& runs, const std::vector<SummaryRow>& summary) {
    nlohmann::json j;
    j["runs"] = nlohmann::json::array();
    for (const auto& run : runs) {
        nlohmann::json one = to_json(run.machine, run.rows, Results());
        one["benchmarks"] = run.benchmarks;
        j["runs"].push_back(std::move(one));
    }
    // The first run's table at the top level too, as a single run writes it.
    if (!runs.empty()) {
        j["machine"] = j["runs"][0]["machine"];
        j["rows"] = j["runs"][0]["rows"];
        j["benchmarks"] = j["runs"][0]["benchmarks"];
    }
    j["summary"] = nlohmann::json::array();
    for (const auto& s : summary) {
        j["summary"].push_back({{"benchmark", s.benchmark},
                                {"target", s.target},
                                {"ratios", s.ratios},
                                {"median_ratio", s.median},
                                {"min_ratio", s.min},
                                {"max_ratio", s.max},
                                {"met_runs", s.met},
                                {"missed_runs", s.missed},
                                {"runs", s.runs},
                                {"met", to_string(s.verdict)}});
    }
    return j;
}

std::string fixed(double v, int digits) {
    std::ostringstream s;
    s << std::fixed << std::setprecision(digits) << v;
    return s.str();
}

std::string spread(const Results& r, const std::string& name, const std::string& counter) {
    auto k = [](double v) { return v >= 1000 ? fixed(v / 1000, 1) + "k" : fixed(v, 0); };
    return k(r.counter_min(name, counter)) + "–" + k(r.counter_max(name, counter));
}

std::string micros(double seconds) {
    const double us = seconds * 1e6;
    return fixed(us, us < 10 ? 2 : 1) + " µs";
}

std::string per_second(double rate, const std::string& unit) {
    const long long n = std::llround(rate);
    std::string digits = std::to_string(n);
    std::string out;
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return out + " " + unit + "/s";
}

std::string times(double ratio) {
    return fixed(ratio, ratio < 10 ? 2 : 1) + "×";
}

TableRow rate_row(const Results& r, const std::string& ours, const std::string& baseline,
                  const std::string& counter, double min_ratio, const std::string& unit) {
    const double a = r.counter(ours, counter);
    const double b = r.counter(baseline, counter);
    TableRow row;
    row.ours = per_second(a, unit);
    row.baseline = per_second(b, unit);
    row.ratio = times(a / b);
    row.verdict = min_ratio <= 0 ? Verdict::Shown : (a / b >= min_ratio ? Verdict::Met : Verdict::Missed);
    row.data = {{"ours_per_second", a},
                {"baseline_per_second", b},
                {"ours_min_per_second", r.counter_min(ours, counter)},
                {"ours_max_per_second", r.counter_max(ours, counter)},
                {"baseline_min_per_second", r.counter_min(baseline, counter)},
                {"baseline_max_per_second", r.counter_max(baseline, counter)},
                {"ratio", a / b},
                {"min_ratio", min_ratio},
                {"repetitions", r.repetitions(ours)}};
    return row;
}

}  // namespace lockstep::bench
