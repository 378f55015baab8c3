#include "context.h"

#include <cctype>
#include <cstdio>
#include <vector>
#include <string>

#include "workers.h"

namespace lockstep::demo {

namespace {
const auto g_start = std::chrono::steady_clock::now();
}

double seconds_since_start() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - g_start).count();
}

DemoContext::DemoContext(const DemoOptions& options, Services& services, Report& report, std::int64_t id_base)
    : options_(options), services_(services), report_(report), id_base_(id_base), next_id_(id_base) {}

DemoContext::~DemoContext() = default;

WorkerPool& DemoContext::worker_pool() {
    if (!pool_) {
        pool_ = std::make_unique<WorkerPool>(services_.endpoints(), services_.prefix(), options_.threads + 4);
    }
    return *pool_;
}

void DemoContext::progress(std::string_view text) const {
    char stamp[32];
    std::snprintf(stamp, sizeof stamp, "[%.1fs] ", seconds_since_start());
    std::string line = stamp;
    line.append(text);
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
}

void DemoContext::add(Result r) { report_.add(std::move(r)); }

namespace {

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

}  // namespace

bool DemoContext::selects(const RaceCase& c, Mode mode) const {
    if (mode == Mode::Forced ? !options_.want_forced() : !options_.want_load()) return false;
    if (!c.has(mode)) return false;
    if (options_.races.empty()) return true;
    for (const auto& id : race_ids(c.race)) {
        for (const auto& want : options_.races) {
            if (lower(id) == lower(want)) return true;
        }
    }
    return false;
}

std::optional<Result> DemoContext::row(const RaceCase& c, const std::string& protection, Mode mode) const {
    if (!selects(c, mode)) return std::nullopt;
    if (!options_.protections.empty()) {
        bool any = false;
        for (const auto& p : options_.protections) any = any || lower(protection).find(lower(p)) != std::string::npos;
        if (!any) return std::nullopt;
    }
    const ExpectedRow* e = c.find(protection, mode);
    Result r = make_result(c.scenario, c.race, protection, mode, e ? e->expected : Outcome::Prevented);
    if (!e) r.error = "row not in the race registry (race_case.h): " + c.race + " / " + protection;
    return r;
}

std::int64_t DemoContext::new_ids(int n) { return next_id_.fetch_add(n); }

std::string DemoContext::unique(std::string_view what) {
    return std::string(what) + "-" + std::to_string(next_name_.fetch_add(1));
}

}  // namespace lockstep::demo
