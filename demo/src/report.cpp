#include "report.h"

#include <algorithm>
#include <cmath>
#include <ostream>

namespace lockstep::demo {

std::string_view to_string(Mode m) noexcept { return m == Mode::Forced ? "forced" : "load"; }
std::string_view to_string(Outcome o) noexcept { return o == Outcome::Reproduced ? "reproduced" : "prevented"; }

bool passed(const Result& r) noexcept {
    if (!r.error.empty()) return false;
    if (r.expected == r.observed) return true;
    // A race that did not happen by chance in a random run without protection is not a failure.
    return r.mode == Mode::Load && r.expected == Outcome::Reproduced;
}

void Report::add(Result r) {
    std::lock_guard lock(mutex_);
    results_.push_back(std::move(r));
}

std::vector<Result> Report::results() const {
    std::lock_guard lock(mutex_);
    return results_;
}

std::vector<Result> Report::results_of(const std::string& scenario) const {
    std::lock_guard lock(mutex_);
    std::vector<Result> out;
    for (const auto& r : results_) {
        if (r.scenario == scenario) out.push_back(r);
    }
    return out;
}

bool Report::all_passed() const {
    std::lock_guard lock(mutex_);
    return !results_.empty() && std::all_of(results_.begin(), results_.end(), [](const Result& r) { return passed(r); });
}

void Report::add_note(const std::string& scenario, std::string text) {
    std::lock_guard lock(mutex_);
    notes_.emplace_back(scenario, std::move(text));
}

std::vector<std::string> Report::notes_of(const std::string& scenario) const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (const auto& [s, text] : notes_) {
        if (s == scenario) out.push_back(text);
    }
    return out;
}

namespace {

// Display width of UTF-8 text (counts code points; the table uses no wide characters).
std::size_t width(const std::string& s) {
    std::size_t n = 0;
    for (unsigned char c : s) {
        if ((c & 0xC0) != 0x80) ++n;
    }
    return n;
}

std::string observed_text(const Result& r) {
    if (!r.error.empty()) return "error";
    std::string s(to_string(r.observed));
    if (r.mode == Mode::Load && r.expected == Outcome::Reproduced && r.observed == Outcome::Prevented) {
        s += " (by chance)";
    }
    return s;
}

}  // namespace

void Report::print_table(std::ostream& out, const std::string& title, const std::vector<Result>& results) {
    const std::vector<std::string> header = {"race", "protection", "mode", "expected", "observed",
                                             "verdict", "evidence", "cost"};
    std::vector<std::vector<std::string>> rows;
    for (const auto& r : results) {
        std::string evidence = r.error.empty() ? r.evidence : r.error;
        rows.push_back({r.race, r.protection, std::string(to_string(r.mode)), std::string(to_string(r.expected)),
                        observed_text(r), passed(r) ? "ok" : "FAIL", evidence, r.cost});
    }
    std::vector<std::size_t> widths(header.size());
    for (std::size_t c = 0; c < header.size(); ++c) {
        widths[c] = width(header[c]);
        for (const auto& row : rows) widths[c] = std::max(widths[c], width(row[c]));
    }
    auto line = [&](const std::vector<std::string>& cells) {
        std::string s;
        for (std::size_t c = 0; c < cells.size(); ++c) {
            s += cells[c];
            if (c + 1 < cells.size()) s += std::string(widths[c] - width(cells[c]) + 2, ' ');
        }
        while (!s.empty() && s.back() == ' ') s.pop_back();
        out << s << '\n';
    };
    out << "\n== " << title << " ==\n";
    line(header);
    std::vector<std::string> rule;
    for (auto w : widths) rule.push_back(std::string(w, '-'));
    line(rule);
    for (const auto& row : rows) line(row);
    out.flush();
}

nlohmann::ordered_json to_json(const Result& r) {
    nlohmann::ordered_json metrics = nlohmann::ordered_json::object();
    for (const auto& [name, value] : r.metrics) {
        if (std::isfinite(value)) {
            metrics[name] = value;
        } else {
            metrics[name] = nullptr;
        }
    }
    nlohmann::ordered_json j = {
        {"scenario", r.scenario},
        {"race", r.race},
        {"protection", r.protection},
        {"mode", to_string(r.mode)},
        {"expected", to_string(r.expected)},
        {"observed", r.error.empty() ? std::string(to_string(r.observed)) : std::string("error")},
        {"verdict", passed(r) ? "ok" : "FAIL"},
        {"evidence", r.evidence},
        {"cost", r.cost},
        {"metrics", metrics},
    };
    if (!r.error.empty()) j["error"] = r.error;
    return j;
}

nlohmann::ordered_json Report::to_json() const {
    nlohmann::ordered_json all = nlohmann::ordered_json::array();
    for (const auto& r : results()) all.push_back(demo::to_json(r));
    return all;
}

}  // namespace lockstep::demo
