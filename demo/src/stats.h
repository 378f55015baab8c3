// Small measuring tools: a latency sample set with percentiles, and wall-clock timestamps that
// are comparable across worker processes (system clock, microseconds).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lockstep::demo {

// Microseconds since the epoch (system clock): comparable between processes on one machine.
inline std::int64_t wall_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

inline double ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

class Samples {
public:
    void add(double value) { values_.push_back(value); }
    void merge(const Samples& other) { values_.insert(values_.end(), other.values_.begin(), other.values_.end()); }
    std::size_t size() const noexcept { return values_.size(); }
    bool empty() const noexcept { return values_.empty(); }

    // Nearest-rank percentile, p in [0, 100]; 0 when empty.
    double percentile(double p) const {
        if (values_.empty()) return 0;
        std::vector<double> v = values_;
        std::sort(v.begin(), v.end());
        auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
        return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
    }
    double max() const { return values_.empty() ? 0 : *std::max_element(values_.begin(), values_.end()); }
    double mean() const {
        if (values_.empty()) return 0;
        double sum = 0;
        for (double x : values_) sum += x;
        return sum / static_cast<double>(values_.size());
    }
    double sum() const {
        double s = 0;
        for (double x : values_) s += x;
        return s;
    }

    nlohmann::json to_json() const { return values_; }
    static Samples from_json(const nlohmann::json& j) {
        Samples s;
        if (j.is_array()) s.values_ = j.get<std::vector<double>>();
        return s;
    }

private:
    std::vector<double> values_;
};

// "12.3" with one decimal, for evidence and cost texts.
inline std::string fixed1(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", v);
    return buf;
}
inline std::string fixed2(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", v);
    return buf;
}

}  // namespace lockstep::demo
