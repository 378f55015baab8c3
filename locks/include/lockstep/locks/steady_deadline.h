// deadline_from_now(d): now + d on the steady clock, saturating at time_point::max(), so
// try_lock_for(hours::max()) waits "forever" instead of overflowing into the past.
#pragma once

#include <chrono>

namespace lockstep::detail {

template <class Rep, class Period>
std::chrono::steady_clock::time_point deadline_from_now(const std::chrono::duration<Rep, Period>& d) {
    using namespace std::chrono;
    const auto now = steady_clock::now();
    if (d <= d.zero()) return now;
    if (duration<double>(d) >= duration<double>(steady_clock::time_point::max() - now)) {
        return steady_clock::time_point::max();
    }
    return now + ceil<steady_clock::duration>(d);
}

}  // namespace lockstep::detail
