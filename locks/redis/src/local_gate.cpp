#include "local_gate.h"

#include <algorithm>

namespace lockstep {

// Uncontended: one uncontended mutex, no allocation. A waiter is a node on its own stack; the
// queue's deque allocates only when it grows past what it already had.
LocalGate::Entry LocalGate::enter(std::optional<Clock::time_point> deadline, std::atomic<std::uint64_t>* waits,
                                  std::uint64_t* passage, const Probe* probe) {
    MutexLock lock(mutex_);
    if (closed_) return Entry::Closed;
    if (!taken_) {
        taken_ = true;  // barging: free means free, sleeping waiters or not
        if (passage) *passage = ++passage_;
        return Entry::Entered;
    }
    if (!deadline || Clock::now() >= *deadline) return Entry::TimedOut;
    if (waits) waits->fetch_add(1);
    Waiter w;
    w.since = Clock::now();
    waiters_.push_back(&w);
    const bool probing = probe && probe->probe && probe->every.count() > 0;
    Clock::time_point next_probe = probing ? w.since + probe->every : Clock::time_point::max();
    for (;;) {
        if (w.granted) {  // leave() removed it from the queue
            if (passage) *passage = w.passage;
            return Entry::Entered;
        }
        if (closed_) {
            remove(&w);
            return Entry::Closed;
        }
        if (!taken_) {
            taken_ = true;
            remove(&w);
            if (passage) *passage = ++passage_;
            return Entry::Entered;
        }
        const Clock::time_point now = Clock::now();
        if (*deadline != Clock::time_point::max() && now >= *deadline) {
            remove(&w);
            return Entry::TimedOut;
        }
        if (now >= next_probe) {
            // The owner may hold a lock Redis no longer gives it (lost, deleted from outside):
            // ask Redis, keeping this waiter's place. Never longer than `every` behind the truth.
            lock.unlock();
            bool got = false;
            try {
                got = probe->probe();
            } catch (...) {
                lock.lock();
                remove(&w);
                throw;
            }
            lock.lock();
            next_probe = Clock::now() + probe->every;
            if (got && !w.granted) {
                remove(&w);
                taken_ = true;
                if (passage) *passage = ++passage_;  // the seized owner's leave() is now ignored
                return Entry::Entered;
            }
            continue;  // granted meanwhile, or still held: re-check
        }
        const Clock::time_point until = std::min(*deadline, next_probe);
        if (until == Clock::time_point::max()) {
            w.cv.wait(mutex_);  // no wait_until(max): its conversion may overflow into "now"
        } else {
            w.cv.wait_until(mutex_, until);
        }
        // Whoever wakes runs the checks above: a pending wake-up is being served (at worst a
        // later leave() wakes the head once more than needed; never once less).
        wake_pending_ = false;
    }
}

void LocalGate::leave(std::uint64_t passage) {
    MutexLock lock(mutex_);
    if (passage != passage_) return;  // seized by a waiter that found the lock free in Redis
    if (waiters_.empty()) {
        taken_ = false;
        return;
    }
    Waiter* head = waiters_.front();
    // Notified under the mutex: the waiter's node (and its cv) lives until it has seen this.
    if (Clock::now() - head->since >= handoff_after_) {
        waiters_.pop_front();
        head->granted = true;  // taken_ stays true: no barger can slip in
        head->passage = ++passage_;
        head->cv.notify_one();
        return;
    }
    taken_ = false;
    if (!wake_pending_) {
        wake_pending_ = true;
        head->cv.notify_one();
    }
}

void LocalGate::close() {
    MutexLock lock(mutex_);
    closed_ = true;
    for (Waiter* w : waiters_) w->cv.notify_one();
}

void LocalGate::remove(Waiter* w) {
    auto it = std::find(waiters_.begin(), waiters_.end(), w);
    if (it == waiters_.end()) return;
    const bool was_head = it == waiters_.begin();
    waiters_.erase(it);
    // A waiter that leaves as head may have been the one a leave() woke to compete for a free
    // gate: the next one competes instead.
    if (was_head && !taken_ && !waiters_.empty()) {
        wake_pending_ = true;
        waiters_.front()->cv.notify_one();
    }
}

std::uint64_t LocalGate::current_passage() const {
    MutexLock lock(mutex_);
    return passage_;
}

std::size_t LocalGate::waiting() const {
    MutexLock lock(mutex_);
    return waiters_.size();
}

bool LocalGate::taken() const {
    MutexLock lock(mutex_);
    return taken_;
}

std::shared_ptr<LocalGate> LocalGateTable::get(const std::string& key) {
    MutexLock lock(mutex_);
    auto it = gates_.find(key);
    if (it != gates_.end()) {
        if (auto g = it->second.lock()) return g;
    }
    auto g = std::make_shared<LocalGate>(handoff_after_);
    if (closed_) g->close();
    gates_[key] = g;
    if (gates_.size() >= sweep_at_) {
        // Many names over time (a lock per product): forget the gates nobody uses any more.
        for (auto i = gates_.begin(); i != gates_.end();) {
            i = i->second.expired() ? gates_.erase(i) : std::next(i);
        }
        sweep_at_ = std::max<std::size_t>(64, gates_.size() * 2);
    }
    return g;
}

void LocalGateTable::close_all() {
    MutexLock lock(mutex_);
    closed_ = true;
    for (auto& [key, weak] : gates_) {
        if (auto g = weak.lock()) g->close();
    }
}

std::size_t LocalGateTable::size() const {
    MutexLock lock(mutex_);
    return gates_.size();
}

}  // namespace lockstep
