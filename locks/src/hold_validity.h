// Internal: the one validity rule of every lock backend (RACES L11). A hold is valid until
// `sent + lease − drift` on the holder's own steady clock, `sent` being the send time of the
// acquisition or of the last renewal the server acknowledged. The server set (or extended) the
// lease at some instant after `sent`, so before valid_until nobody else can be granted the lock,
// whatever the network did to the request, the reply, or the requests after it. lost() is true
// from valid_until on, checked against the clock on every call (no round trip); the backend's
// expiry thread (hold_table.h) or watchdog (the Redis client) fires on_lost at that instant.
//
// Used by the hold table (every backend but Redis) and by the Redis client's
// own hold registry, so that both count validity the same way.
//
// Thread safety: pure functions; the two atomics helpers are lock-free compare-and-swap loops,
// safe from any thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>

namespace lockstep::locks_detail {

using SteadyClock = std::chrono::steady_clock;
using SteadyTime = SteadyClock::time_point;

// The margin a validity keeps below the lease: max(2 ms, 1% of the lease). The 1% covers the
// holder's steady clock and the server's running at slightly different rates over one lease
// (Redlock's clock drift factor); the 2 ms cover the server's timer resolution (Redis expires
// keys on a millisecond clock, MySQL's wait_timeout and ZooKeeper's session ticks round up).
inline SteadyClock::duration validity_drift(std::chrono::milliseconds lease) {
    return std::max<SteadyClock::duration>(std::chrono::milliseconds(2), lease / 100);
}

// The end of a hold's validity when the server set (or last extended) its lease at or after
// `sent`, the send time of the acquisition or renewal it acknowledged.
inline SteadyTime valid_until_from(SteadyTime sent, std::chrono::milliseconds lease) {
    return sent + lease - validity_drift(lease);
}

// An acknowledged renewal: `valid_until` moves to `proposed` unless it is already later (a late
// acknowledgement of an older renewal never moves it back).
inline void extend_validity(std::atomic<SteadyTime>& valid_until, SteadyTime proposed) {
    SteadyTime current = valid_until.load();
    while (current < proposed && !valid_until.compare_exchange_weak(current, proposed)) {
    }
}

// Evidence that the hold ends sooner (a disconnection): `valid_until` moves to `bound` unless it
// is already earlier.
inline void shorten_validity(std::atomic<SteadyTime>& valid_until, SteadyTime bound) {
    SteadyTime current = valid_until.load();
    while (bound < current && !valid_until.compare_exchange_weak(current, bound)) {
    }
}

}  // namespace lockstep::locks_detail
