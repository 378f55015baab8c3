// JobSchedule: when a scheduled job runs, as a sequence of slots. A slot is one run's turn: an
// integer index and the interval [start, end) of server time it covers. Every node computes the
// slot from the same clock (the lock server's, LockService::server_time()), so nodes agree on
// "which run is this" however late their timers fire or however far their own clocks are off.
//
//   auto every_minute = lockstep::JobSchedule::every(std::chrono::minutes(1));
//   auto twice_a_day  = lockstep::JobSchedule::daily_at({std::chrono::hours(2), std::chrono::hours(14)});
//   lockstep::JobSlot s = every_minute.slot_at(locks.server_time());   // s.index, s.start, s.end
//
// Two kinds: a fixed period with an offset (slot i starts at epoch + offset + i * period), or a
// list of times of day in UTC (one slot per listed time, ending at the next listed time).
// Millisecond resolution.
//
// Thread safety: an immutable value; any thread may use it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace lockstep {

struct JobSlot {
    std::int64_t index = 0;
    std::chrono::system_clock::time_point start;
    std::chrono::system_clock::time_point end;  // the next slot's start

    std::chrono::milliseconds length() const {
        return std::chrono::duration_cast<std::chrono::milliseconds>(end - start);
    }
};

class JobSchedule {
public:
    // Slot i covers [epoch + offset + i * period, + period). ConfigError when period <= 0; the
    // offset is taken modulo the period (a negative one too).
    static JobSchedule every(std::chrono::milliseconds period, std::chrono::milliseconds offset = {});
    // One slot per listed time of day (UTC, from midnight), ending at the next listed time (the
    // last one at the first of the next day). Slot index = days since the epoch * N + position.
    // ConfigError when the list is empty or a time is outside [0, 24 h); duplicates are merged.
    static JobSchedule daily_at(std::vector<std::chrono::milliseconds> times_of_day_utc);

    // The slot that contains `t`.
    JobSlot slot_at(std::chrono::system_clock::time_point t) const;
    // The slot with this index.
    JobSlot slot(std::int64_t index) const;
    // "every 60000 ms (offset 0 ms)", "daily at 02:00:00.000, 14:00:00.000 UTC" (for logs).
    std::string describe() const;

private:
    JobSchedule() = default;
    std::int64_t period_ms_ = 0;      // periodic when > 0
    std::int64_t offset_ms_ = 0;
    std::vector<std::int64_t> times_ms_;  // daily: sorted, distinct, in [0, 24 h)
};

}  // namespace lockstep
