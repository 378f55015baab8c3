#include "html_report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "consistency_checker.h"

namespace lockstep::demo {

namespace {

std::string esc(const std::string& s) {
    std::string o;
    for (char c : s) {
        switch (c) {
            case '&': o += "&amp;"; break;
            case '<': o += "&lt;"; break;
            case '>': o += "&gt;"; break;
            case '"': o += "&quot;"; break;
            default: o += c;
        }
    }
    return o;
}

// Numbers in data-* attributes: exact enough to compare with the JSON (tests/demo parses them).
std::string num(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.6g", v);
    return b;
}
std::string px(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f", v);
    return b;
}

std::optional<double> metric(const Result& r, const std::string& name) {
    for (const auto& [n, v] : r.metrics) {
        if (n == name) return v;
    }
    return std::nullopt;
}

std::string row_id(const Result& r) { return r.race + " | " + r.protection + " | " + std::string(to_string(r.mode)); }

const char* kPalette[] = {"#1b6ca8", "#d1495b", "#edae49", "#00798c", "#66a182", "#8d6a9f", "#30343f"};

// Stale-cache load rows: stale reads that began after the newer write returned, against ops/s.
void stale_vs_throughput(std::ostream& out, const std::vector<Result>& rows) {
    std::vector<const Result*> pts;
    for (const auto& r : rows) {
        if (r.mode == Mode::Load && metric(r, "ops_per_s") && metric(r, "lasting_stale_reads")) pts.push_back(&r);
    }
    out << "<h2 id=\"stale-vs-throughput\">Stale reads after the write returned vs throughput</h2>\n";
    if (pts.empty()) {
        out << "<p>No stale-cache load rows in this run.</p>\n";
        return;
    }
    out << "<p>One point per write strategy × lock mode (stale-cache load rows): x = operations/s, y = reads "
           "that began after a newer write had returned and still saw the old version (C1–C4 damage). "
           "Colour: lock mode.</p>\n";
    double xmax = 1, ymax = 1;
    for (const Result* r : pts) {
        xmax = std::max(xmax, *metric(*r, "ops_per_s"));
        ymax = std::max(ymax, *metric(*r, "lasting_stale_reads"));
    }
    const double W = 760, H = 360, L = 60, B = 40, T = 10, R = 20;
    out << "<svg class=\"chart\" id=\"chart-stale\" width=\"" << W << "\" height=\"" << H
        << "\" viewBox=\"0 0 " << W << " " << H << "\" xmlns=\"http://www.w3.org/2000/svg\">\n";
    out << "<line x1=\"" << L << "\" y1=\"" << H - B << "\" x2=\"" << W - R << "\" y2=\"" << H - B
        << "\" stroke=\"#333\"/><line x1=\"" << L << "\" y1=\"" << T << "\" x2=\"" << L << "\" y2=\"" << H - B
        << "\" stroke=\"#333\"/>\n";
    out << "<text x=\"" << W / 2 << "\" y=\"" << H - 8 << "\" text-anchor=\"middle\">ops/s (max " << num(xmax)
        << ")</text><text x=\"12\" y=\"" << H / 2 << "\" transform=\"rotate(-90 12 " << H / 2
        << ")\" text-anchor=\"middle\">stale reads after the write (max " << num(ymax) << ")</text>\n";
    for (const Result* r : pts) {
        const double x = *metric(*r, "ops_per_s"), y = *metric(*r, "lasting_stale_reads");
        const double cx = L + x / xmax * (W - L - R), cy = H - B - y / ymax * (H - B - T);
        const std::string mode = r->protection.substr(r->protection.rfind(' ') + 1);
        const char* colour = mode == "None" ? kPalette[1] : mode == "Mutex" ? kPalette[2] : kPalette[0];
        out << "<circle class=\"pt\" data-row=\"" << esc(row_id(*r)) << "\" data-x=\"" << num(x) << "\" data-y=\""
            << num(y) << "\" data-rate=\"" << num(metric(*r, "stale_read_rate").value_or(0)) << "\" cx=\"" << px(cx)
            << "\" cy=\"" << px(cy) << "\" r=\"5\" fill=\"" << colour << "\"><title>" << esc(r->protection) << ": "
            << num(x) << " ops/s, " << num(y) << " stale reads after the write</title></circle>\n";
        out << "<text x=\"" << px(cx + 7) << "\" y=\"" << px(cy + 4) << "\" font-size=\"9\">" << esc(r->protection)
            << "</text>\n";
    }
    out << "</svg>\n";
}

// Stale-cache load rows: how long stale entries lived, as a stacked bar per row.
void stale_lifetimes(std::ostream& out, const std::vector<Result>& rows) {
    std::vector<std::string> buckets;
    for (double b : kLifeBucketsMs) buckets.push_back("stale_entry_life_le_" + std::to_string(static_cast<int>(b)) + "ms");
    buckets.push_back("stale_entry_life_gt_" + std::to_string(static_cast<int>(kLifeBucketsMs[std::size(kLifeBucketsMs) - 1])) + "ms");
    std::vector<const Result*> bars;
    for (const auto& r : rows) {
        if (r.mode == Mode::Load && metric(r, buckets.front())) bars.push_back(&r);
    }
    out << "<h2 id=\"stale-lifetimes\">How long stale entries lived</h2>\n";
    if (bars.empty()) {
        out << "<p>No stale-cache load rows in this run.</p>\n";
        return;
    }
    double most = 1;
    for (const Result* r : bars) {
        double sum = 0;
        for (const auto& b : buckets) sum += metric(*r, b).value_or(0);
        most = std::max(most, sum);
    }
    out << "<p>Per strategy × lock mode: the stale entries the sampler saw (the cache held a version older than "
           "one committed), by how long each lived. Bar length: number of entries (longest "
        << num(most) << ").</p>\n<p>";
    for (std::size_t i = 0; i < buckets.size(); ++i) {
        const std::string name = i < std::size(kLifeBucketsMs) ? "&le; " + num(kLifeBucketsMs[i]) + " ms"
                                                               : "&gt; " + num(kLifeBucketsMs[i - 1]) + " ms";
        out << "<span style=\"background:" << kPalette[i % std::size(kPalette)] << ";color:#fff;padding:0 4px\">" << name
            << "</span> ";
    }
    out << "</p>\n";
    const double W = 760, rowh = 18, L = 330;
    const double H = rowh * static_cast<double>(bars.size()) + 10;
    out << "<svg class=\"chart\" id=\"chart-lifetimes\" width=\"" << W << "\" height=\"" << H << "\" viewBox=\"0 0 " << W
        << " " << H << "\" xmlns=\"http://www.w3.org/2000/svg\">\n";
    double y = 5;
    for (const Result* r : bars) {
        out << "<text x=\"" << L - 6 << "\" y=\"" << px(y + 12) << "\" text-anchor=\"end\" font-size=\"11\">"
            << esc(r->protection) << "</text>\n";
        double x = L;
        for (std::size_t i = 0; i < buckets.size(); ++i) {
            const double n = metric(*r, buckets[i]).value_or(0);
            const double w = n / most * (W - L - 10);
            out << "<rect class=\"life\" data-row=\"" << esc(row_id(*r)) << "\" data-bucket=\"" << buckets[i]
                << "\" data-count=\"" << num(n) << "\" x=\"" << px(x) << "\" y=\"" << px(y) << "\" width=\"" << px(w)
                << "\" height=\"" << rowh - 4 << "\" fill=\"" << kPalette[i % std::size(kPalette)] << "\"><title>"
                << num(n) << "</title></rect>\n";
            x += w;
        }
        y += rowh;
    }
    out << "</svg>\n";
}

// The cost metric of a load row (higher throughput or fewer commands: whatever the row measures).
std::optional<std::pair<std::string, double>> cost_of(const Result& r) {
    for (const char* n : {"orders_per_s", "ops_per_s", "reads_per_s", "ms_per_round", "redis_commands_per_acquisition", "db_loads_per_s"}) {
        if (auto v = metric(r, n)) return std::make_pair(std::string(n), *v);
    }
    return std::nullopt;
}
// The effect metric: how much of the race's damage the run saw.
std::optional<std::pair<std::string, double>> effect_of(const Result& r) {
    for (const char* n : {"oversold", "lasting_stale_reads", "redundant_loads", "repeated_missing_loads",
                          "rounds_restored_more_than_once", "wasted_attempts_per_acquisition", "lock_busy_share"}) {
        if (auto v = metric(r, n)) return std::make_pair(std::string(n), *v);
    }
    return std::nullopt;
}

// Per protection: its cost beside its effect, bars scaled within each race.
void cost_beside_effect(std::ostream& out, const std::vector<Result>& results) {
    out << "<h2 id=\"cost-effect\">Per protection: its cost beside its effect</h2>\n";
    std::vector<std::string> groups;
    std::map<std::string, std::vector<const Result*>> by_group;
    for (const auto& r : results) {
        if (r.mode != Mode::Load || !cost_of(r) || !effect_of(r)) continue;
        const std::string g = r.scenario + " / " + r.race;
        if (!by_group.count(g)) groups.push_back(g);
        by_group[g].push_back(&r);
    }
    if (groups.empty()) {
        out << "<p>No load rows in this run.</p>\n";
        return;
    }
    out << "<p>Load rows. Left: the damage the run saw (" << "red"
        << "); right: what the protection cost (blue). Bars are scaled within each race.</p>\n";
    for (const auto& g : groups) {
        const auto& rows = by_group[g];
        double emax = 0, cmax = 0;
        for (const Result* r : rows) {
            emax = std::max(emax, effect_of(*r)->second);
            cmax = std::max(cmax, cost_of(*r)->second);
        }
        if (emax <= 0) emax = 1;
        if (cmax <= 0) cmax = 1;
        const double W = 900, rowh = 18, L = 330, half = 270;
        const double H = rowh * static_cast<double>(rows.size()) + 24;
        out << "<h3>" << esc(g) << ": " << esc(effect_of(*rows.front())->first) << " | "
            << esc(cost_of(*rows.front())->first) << "</h3>\n";
        out << "<svg class=\"chart\" width=\"" << W << "\" height=\"" << H << "\" viewBox=\"0 0 " << W << " " << H
            << "\" xmlns=\"http://www.w3.org/2000/svg\">\n";
        double y = 4;
        for (const Result* r : rows) {
            const auto e = *effect_of(*r);
            const auto c = *cost_of(*r);
            const double ew = e.second / emax * (half - 60), cw = c.second / cmax * (half - 60);
            out << "<text x=\"" << L - 6 << "\" y=\"" << px(y + 12) << "\" text-anchor=\"end\" font-size=\"11\">"
                << esc(r->protection) << "</text>\n";
            out << "<rect class=\"effect\" data-row=\"" << esc(row_id(*r)) << "\" data-metric=\"" << e.first
                << "\" data-value=\"" << num(e.second) << "\" x=\"" << L << "\" y=\"" << px(y) << "\" width=\""
                << px(ew) << "\" height=\"" << rowh - 4 << "\" fill=\"#d1495b\"/>"
                << "<text x=\"" << px(L + ew + 3) << "\" y=\"" << px(y + 12) << "\" font-size=\"10\">" << num(e.second)
                << "</text>\n";
            out << "<rect class=\"cost\" data-row=\"" << esc(row_id(*r)) << "\" data-metric=\"" << c.first
                << "\" data-value=\"" << num(c.second) << "\" x=\"" << L + half << "\" y=\"" << px(y) << "\" width=\""
                << px(cw) << "\" height=\"" << rowh - 4 << "\" fill=\"#1b6ca8\"/>"
                << "<text x=\"" << px(L + half + cw + 3) << "\" y=\"" << px(y + 12) << "\" font-size=\"10\">"
                << num(c.second) << "</text>\n";
            y += rowh;
        }
        out << "</svg>\n";
    }
}

// Per lock backend (and the demo-only waiting locks): hand-over latency, p50 and max.
void handover(std::ostream& out, const std::vector<Result>& results) {
    out << "<h2 id=\"handover\">Per lock backend: hand-over latency</h2>\n";
    std::vector<const Result*> rows;
    for (const auto& r : results) {
        if (metric(r, "handover_p50_ms") && metric(r, "handover_max_ms")) rows.push_back(&r);
    }
    if (rows.empty()) {
        out << "<p>No lock hand-over rows in this run (race L7 or L9).</p>\n";
        return;
    }
    double most = 0;
    for (const Result* r : rows) most = std::max(most, *metric(*r, "handover_max_ms"));
    if (most <= 0) most = 1;
    out << "<p>From a release to the next waiter's acquisition. Dark: p50; light: max (longest " << num(most)
        << " ms). One row per lock and run; a new lock backend adds its rows.</p>\n";
    const double W = 900, rowh = 20, L = 420;
    const double H = rowh * static_cast<double>(rows.size()) + 10;
    out << "<svg class=\"chart\" id=\"chart-handover\" width=\"" << W << "\" height=\"" << H << "\" viewBox=\"0 0 " << W
        << " " << H << "\" xmlns=\"http://www.w3.org/2000/svg\">\n";
    double y = 5;
    for (const Result* r : rows) {
        const double p50 = *metric(*r, "handover_p50_ms"), mx = *metric(*r, "handover_max_ms");
        const double waiters = metric(*r, "waiters").value_or(0);
        out << "<text x=\"" << L - 6 << "\" y=\"" << px(y + 13) << "\" text-anchor=\"end\" font-size=\"11\">"
            << esc(r->race + " " + r->protection + " (" + std::string(to_string(r->mode)) + ", " + num(waiters) +
                   " waiters)")
            << "</text>\n";
        out << "<rect class=\"handover\" data-row=\"" << esc(row_id(*r)) << "\" data-p50=\"" << num(p50)
            << "\" data-max=\"" << num(mx) << "\" x=\"" << L << "\" y=\"" << px(y) << "\" width=\""
            << px(mx / most * (W - L - 80)) << "\" height=\"" << rowh - 4 << "\" fill=\"#9cc3e4\"/>";
        out << "<rect x=\"" << L << "\" y=\"" << px(y) << "\" width=\"" << px(p50 / most * (W - L - 80))
            << "\" height=\"" << rowh - 4 << "\" fill=\"#1b6ca8\"/>";
        out << "<text x=\"" << px(L + mx / most * (W - L - 80) + 3) << "\" y=\"" << px(y + 13) << "\" font-size=\"10\">p50 "
            << num(p50) << " ms, max " << num(mx) << " ms</text>\n";
        y += rowh;
    }
    out << "</svg>\n";
}

}  // namespace

void write_html(std::ostream& out, const Report& report, const DemoOptions& options) {
    const auto results = report.results();
    int failed = 0;
    for (const auto& r : results) failed += passed(r) ? 0 : 1;
    out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>lockstep-demo report</title>\n"
        << "<style>body{font:14px sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;font-size:12px}"
           "td,th{border:1px solid #ccc;padding:2px 6px;vertical-align:top}tr.fail td{background:#fdd}"
           "td.ok{color:#066}td.FAIL{color:#b00;font-weight:bold}svg.chart{display:block;margin:0.5em 0 1.5em}"
           "svg text{font-family:sans-serif}</style></head><body>\n";
    out << "<h1>lockstep-demo</h1>\n<p id=\"summary\" data-results=\"" << results.size() << "\" data-failed=\"" << failed
        << "\">" << results.size() << " results: " << results.size() - failed << " ok, " << failed << " FAIL (seed "
        << options.seed << ", " << options.workers() << " workers"
        << (options.processes > 0 ? " in " + std::to_string(options.processes) + " processes" : " as threads")
        << "). The races are described in docs/races.md.</p>\n";
    out << "<p><a href=\"#stale-vs-throughput\">stale reads vs throughput</a> · <a href=\"#stale-lifetimes\">stale entry "
           "lifetimes</a> · <a href=\"#cost-effect\">cost beside effect</a> · <a href=\"#handover\">hand-over "
           "latency</a> · <a href=\"#results\">all results</a></p>\n";
    std::vector<Result> stale;
    for (const auto& r : results) {
        if (r.scenario == "stale-cache") stale.push_back(r);
    }
    stale_vs_throughput(out, stale);
    stale_lifetimes(out, stale);
    cost_beside_effect(out, results);
    handover(out, results);
    out << "<h2>Results</h2>\n<table id=\"results\"><tr><th>scenario</th><th>race</th><th>protection</th><th>mode</th>"
           "<th>expected</th><th>observed</th><th>verdict</th><th>evidence</th><th>cost</th></tr>\n";
    for (const auto& r : results) {
        const bool ok = passed(r);
        out << "<tr" << (ok ? "" : " class=\"fail\"") << "><td>" << esc(r.scenario) << "</td><td>" << esc(r.race)
            << "</td><td>" << esc(r.protection) << "</td><td>" << to_string(r.mode) << "</td><td>"
            << to_string(r.expected) << "</td><td>" << (r.error.empty() ? std::string(to_string(r.observed)) : "error")
            << "</td><td class=\"" << (ok ? "ok" : "FAIL") << "\">" << (ok ? "ok" : "FAIL") << "</td><td>"
            << esc(r.evidence + (r.error.empty() ? "" : " " + r.error)) << "</td><td>" << esc(r.cost) << "</td></tr>\n";
    }
    out << "</table>\n";
    out << "</body></html>\n";
}

}  // namespace lockstep::demo
