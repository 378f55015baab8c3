// The release flow of every Redis lock side: L10 (a thread that does not hold the lock cannot
// release it: NotOwnerError, nothing sent), the count-down of a reentrant hold, a hold found gone
// at unlock (L3, L4: reported once, thrown only to unlock_checked()), and the absorbed second
// unlock of a std guard after a LockLostError.
#include <utility>

#include "lock_client_impl.h"
#include "lockstep/core/error.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/core/logging.h"
#include "lockstep/locks/lock_errors.h"

namespace lockstep {

void RedisLockClient::Impl::release(const LockSide& side, bool checked) {
    const std::string owner = owner_of_this_thread();
    const std::string hid = hold_id(side.hold_key(), owner);
    std::shared_ptr<Hold> held;
    bool last = false;
    bool client_closed = false;
    {
        MutexLock lock(mutex);
        auto it = holds.find(hid);
        if (it == holds.end()) {
            if (absorb_one_unlock.erase(hid) > 0) return;  // the guard's unlock after a LockLostError
            // L10: never a silent success, and nothing is sent: a thread that does not hold the
            // lock cannot release it.
            throw NotOwnerError("lock '" + side.name() + "': unlock of a " + side.kind() +
                                " lock this thread does not hold");
        }
        held = it->second;
        last = held->count == 1;
        client_closed = closed;
        if (!closed) ++calls_in_use;  // a Use, taken under the same lock as the check
    }
    auto forget = [&] {
        stats.hold_time.record(SteadyClock::now() - held->acquired_at);
        MutexLock lock(mutex);
        held->active = false;
        auto it = holds.find(hid);
        if (it != holds.end() && it->second == held) holds.erase(it);
    };
    auto lost_error = [&] {
        {
            MutexLock lock(mutex);
            absorb_one_unlock.insert(hid);
        }
        return LockLostError("lock '" + side.name() + "': unlock of a " + side.kind() +
                             " hold that was lost (lease ran out, server restarted or client destroyed); "
                             "the critical section was not protected to its end");
    };
    if (client_closed) {
        // close() released this hold and reported it; nothing reaches Redis any more.
        forget();
        stats.unlocks_of_lost_holds.fetch_add(1);
        if (checked) throw lost_error();
        return;
    }
    struct EndUse {
        Impl& impl;
        ~EndUse() {
            MutexLock lock(impl.mutex);
            if (--impl.calls_in_use == 0) impl.calls_done_cv.notify_all();
        }
    } end_use{*this};

    fault::point(side.fault_points().before_release);
    int r = 0;
    try {
        r = side.release(owner, last);
    } catch (const std::exception& e) {
        // The release may or may not have run. Stop renewing a last hold (its lease ends it at
        // the latest); count an inner one down.
        if (last) {
            forget();
        } else {
            MutexLock lock(mutex);
            --held->count;
        }
        if (checked) throw;
        // The guard path: reported, never thrown (a std guard's destructor would terminate).
        stats.unlock_errors.fetch_add(1);
        logger()->warn("lock '{}': releasing the {} hold of {} failed ({}); its lease ends it", side.name(),
                       side.kind(), owner, e.what());
        return;
    }
    fault::point(side.fault_points().after_release);

    if (r == 0) {
        // L3, L4, L10: the hold is not ours any more (lease ran out, maybe someone else holds it
        // now, or the server restarted). Nothing was deleted. Reported (once) either way; thrown
        // only to a checked unlock.
        std::optional<LockLoss> loss;
        {
            MutexLock lock(mutex);
            loss = mark_lost_locked(*held, LockLossReason::FoundGone, "gone at unlock");
        }
        stats.unlocks_of_lost_holds.fetch_add(1);
        forget();
        if (loss) report(held, *loss);
        if (checked) throw lost_error();
        return;
    }
    if (last) {
        forget();
    } else {
        MutexLock lock(mutex);
        --held->count;
    }
}

}  // namespace lockstep
