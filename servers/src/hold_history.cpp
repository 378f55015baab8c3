#include "lockstep/servers/hold_history.h"

#include <algorithm>
#include <map>
#include <sstream>

namespace lockstep {

std::int64_t monotonic_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

std::string HoldRecord::to_line() const {
    return "hold " + name + " " + holder + " " + std::to_string(token) + " " + std::to_string(acquired_us) + " " +
           std::to_string(believed_until_us);
}

std::optional<HoldRecord> HoldRecord::from_line(const std::string& line) {
    std::istringstream in(line);
    std::string tag;
    HoldRecord r;
    if (!(in >> tag >> r.name >> r.holder >> r.token >> r.acquired_us >> r.believed_until_us) || tag != "hold") {
        return std::nullopt;
    }
    return r;
}

std::string HoldAnomaly::describe() const {
    const std::int64_t t0 = first.acquired_us;
    auto line = [t0](const HoldRecord& r) {
        return "  " + r.holder + " held '" + r.name + "' with token " + std::to_string(r.token) + ", believed from +" +
               std::to_string((r.acquired_us - t0) / 1000) + " ms to +" + std::to_string((r.believed_until_us - t0) / 1000) +
               " ms\n";
    };
    const std::string what = kind == Kind::TwoBelievers
                                 ? "two holders believed they held it at once (" +
                                       std::to_string((first.believed_until_us - second.acquired_us) / 1000) +
                                       " ms of overlap):\n"
                                 : "a later acquisition got a token not above an earlier one's:\n";
    return what + line(first) + line(second);
}

HoldHistory::Belief HoldHistory::begin(std::string name, std::string holder, std::int64_t token) {
    Belief b;
    b.record_.name = std::move(name);
    b.record_.holder = std::move(holder);
    b.record_.token = token;
    b.record_.acquired_us = monotonic_us();
    b.record_.believed_until_us = b.record_.acquired_us;
    return b;
}

void HoldHistory::end(Belief belief) { add(std::move(belief.record_)); }

void HoldHistory::add(HoldRecord record) {
    std::lock_guard g(mu_);
    records_.push_back(std::move(record));
}

std::vector<HoldRecord> HoldHistory::records() const {
    std::lock_guard g(mu_);
    return records_;
}

std::vector<HoldAnomaly> HoldHistory::check() const { return check_holds(records()); }

std::vector<HoldAnomaly> check_holds(std::vector<HoldRecord> records) {
    std::map<std::string, std::vector<HoldRecord>> by_name;
    for (auto& r : records) by_name[r.name].push_back(std::move(r));
    std::vector<HoldAnomaly> out;
    for (auto& [name, holds] : by_name) {
        std::sort(holds.begin(), holds.end(),
                  [](const HoldRecord& a, const HoldRecord& b) { return a.acquired_us < b.acquired_us; });
        // The earlier hold that believed the longest, and the one with the highest token among
        // the holds that had ended before the current acquisition.
        const HoldRecord* longest = nullptr;
        for (std::size_t i = 0; i < holds.size(); ++i) {
            const HoldRecord& h = holds[i];
            if (longest && longest->believed_until_us > h.acquired_us) {
                out.push_back({HoldAnomaly::Kind::TwoBelievers, *longest, h});
            }
            for (std::size_t j = 0; j < i; ++j) {
                const HoldRecord& e = holds[j];
                if (e.believed_until_us <= h.acquired_us && h.token <= e.token) {
                    out.push_back({HoldAnomaly::Kind::TokenNotIncreasing, e, h});
                    break;
                }
            }
            if (!longest || h.believed_until_us > longest->believed_until_us) longest = &h;
        }
    }
    std::sort(out.begin(), out.end(), [](const HoldAnomaly& a, const HoldAnomaly& b) {
        return a.second.acquired_us < b.second.acquired_us;
    });
    return out;
}

}  // namespace lockstep
