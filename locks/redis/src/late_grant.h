// Internal: RACES L11 for both Redis mutexes, the barging client's lock sides and the fair
// mutex. An acquisition whose reply came back after the validity it would start had ended (a
// network slower than the lease) is no hold: the server may have expired it and given the lock
// to someone else meanwhile. What it may have taken is given back, by the script that deletes
// only this acquisition's hold (a client side's release script; the fair mutex's leave script,
// which also frees a grant made to the waiter), and the caller goes on as if the lock were busy,
// until its deadline. One rule and one give-back for every Redis lock.
//
// Thread safety: pure functions of their arguments; give_back_late_grant() runs `give_back` on
// the calling thread.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "hold_validity.h"

namespace lockstep {

// True when a reply that started a lease at or after `leased_from` (the send time of the script
// that set it; for a fair grant, of the renewal that confirmed it) arrives at or after the
// validity that lease would give (hold_validity.h).
inline bool arrived_after_validity(locks_detail::SteadyTime leased_from, std::chrono::milliseconds lease) {
    return locks_detail::SteadyClock::now() >= locks_detail::valid_until_from(leased_from, lease);
}

// Gives back a grant that arrived after its validity: runs `give_back` (the lock's script that
// deletes only this acquisition's hold). A failure is logged, never thrown: the lease ends what
// is left. `tag` is the lock log's tag ("redis mutex", "redis fair mutex").
void give_back_late_grant(const std::string& name, const std::string& tag,
                          const std::function<void()>& give_back) noexcept;

}  // namespace lockstep
