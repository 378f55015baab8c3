#include "lockstep/coordination/job_schedule.h"

#include <algorithm>
#include <cstdio>

#include "lockstep/core/error.h"

namespace lockstep {

namespace {

constexpr std::int64_t kDayMs = 24LL * 3600 * 1000;

// Floor division: slots before the epoch get negative indexes, not a slot around zero twice as long.
std::int64_t floor_div(std::int64_t a, std::int64_t b) {
    const std::int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

std::chrono::system_clock::time_point at_ms(std::int64_t ms) {
    return std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
}

std::string time_of_day(std::int64_t ms) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld.%03lld", static_cast<long long>(ms / 3600000),
                  static_cast<long long>(ms / 60000 % 60), static_cast<long long>(ms / 1000 % 60),
                  static_cast<long long>(ms % 1000));
    return buf;
}

}  // namespace

JobSchedule JobSchedule::every(std::chrono::milliseconds period, std::chrono::milliseconds offset) {
    if (period.count() <= 0) throw ConfigError("period", "a job's period must be positive");
    JobSchedule s;
    s.period_ms_ = period.count();
    s.offset_ms_ = offset.count() - floor_div(offset.count(), period.count()) * period.count();
    return s;
}

JobSchedule JobSchedule::daily_at(std::vector<std::chrono::milliseconds> times_of_day_utc) {
    if (times_of_day_utc.empty()) throw ConfigError("times_of_day_utc", "a daily schedule needs at least one time");
    JobSchedule s;
    for (const auto t : times_of_day_utc) {
        if (t.count() < 0 || t.count() >= kDayMs) throw ConfigError("times_of_day_utc", "a time of day must be in [0, 24 h)");
        s.times_ms_.push_back(t.count());
    }
    std::sort(s.times_ms_.begin(), s.times_ms_.end());
    s.times_ms_.erase(std::unique(s.times_ms_.begin(), s.times_ms_.end()), s.times_ms_.end());
    return s;
}

JobSlot JobSchedule::slot_at(std::chrono::system_clock::time_point t) const {
    const std::int64_t ms = std::chrono::floor<std::chrono::milliseconds>(t.time_since_epoch()).count();
    if (period_ms_ > 0) return slot(floor_div(ms - offset_ms_, period_ms_));
    const auto n = static_cast<std::int64_t>(times_ms_.size());
    std::int64_t day = floor_div(ms, kDayMs);
    const std::int64_t tod = ms - day * kDayMs;
    // The last listed time at or before `tod`; before the first one, yesterday's last.
    const auto after = std::upper_bound(times_ms_.begin(), times_ms_.end(), tod);
    std::int64_t i = (after - times_ms_.begin()) - 1;
    if (i < 0) {
        --day;
        i = n - 1;
    }
    return slot(day * n + i);
}

JobSlot JobSchedule::slot(std::int64_t index) const {
    if (period_ms_ > 0) {
        const std::int64_t start = offset_ms_ + index * period_ms_;
        return {index, at_ms(start), at_ms(start + period_ms_)};
    }
    const auto n = static_cast<std::int64_t>(times_ms_.size());
    const std::int64_t day = floor_div(index, n);
    const auto i = static_cast<std::size_t>(index - day * n);
    const std::int64_t start = day * kDayMs + times_ms_[i];
    const std::int64_t end = i + 1 < times_ms_.size() ? day * kDayMs + times_ms_[i + 1] : (day + 1) * kDayMs + times_ms_[0];
    return {index, at_ms(start), at_ms(end)};
}

std::string JobSchedule::describe() const {
    if (period_ms_ > 0) {
        return "every " + std::to_string(period_ms_) + " ms (offset " + std::to_string(offset_ms_) + " ms)";
    }
    std::string out = "daily at ";
    for (std::size_t i = 0; i < times_ms_.size(); ++i) out += (i ? ", " : "") + time_of_day(times_ms_[i]);
    return out + " UTC";
}

}  // namespace lockstep
