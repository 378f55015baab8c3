// DeleteQueue: immediate, delayed (batched) and retried deletes.
#include "delete_queue.h"

#include <algorithm>

#include "lockstep/core/fault_point.h"
#include "lockstep/core/logging.h"
#include "lockstep/strategies/fault_points.h"

namespace lockstep::detail {

DeleteQueue::DeleteQueue(std::string repository, EntryStore& store, BackgroundScheduler& scheduler,
                         DeleteTiming timing, RepositoryStats& stats, CacheHealth& health, KeyTrace& trace)
    : repository_(std::move(repository)),
      store_(store),
      scheduler_(scheduler),
      timing_(timing),
      stats_(stats),
      health_(health),
      trace_(trace) {}

void DeleteQueue::close() {
    closed_ = true;
    std::string dropped;
    std::size_t pending = 0;
    {
        MutexLock lock(retry_mutex_);
        pending = retries_.size();
        for (const auto& [key, r] : retries_) {
            if (dropped.size() > 400) {
                dropped += ", ...";
                break;
            }
            dropped += (dropped.empty() ? "" : ", ") + key;
        }
    }
    if (pending == 0) return;
    logger()->warn("repository '{}' destroyed with {} queued delete(s) not landed; dropping them: {} "
                   "(each entry expires within its TTL)",
                   repository_, pending, dropped);
}

std::size_t DeleteQueue::pending() const {
    MutexLock lock(retry_mutex_);
    return retries_.size();
}

// ---- now -----------------------------------------------------------------------------------

// A delete that did not land: counted, logged, and queued for the retry queue (C5).
void DeleteQueue::failed(const std::string& key, const Error& e, Clock::time_point started) {
    stats_.lat.cache_error.record(Clock::now() - started);
    bump(stats_.c.deletes_failed);
    health_.failed(e, "delete of " + key);
    enqueue_retry(key);
}

bool DeleteQueue::delete_key(const std::string& key) {
    const auto t0 = Clock::now();
    try {
        store_.remove({key});
        bump(stats_.c.deletes);
        trace_(key, "deleted (invalidation)");
        return true;
    } catch (const Error& e) {
        failed(key, e, t0);
        return false;
    }
}

std::unique_ptr<PendingRemove> DeleteQueue::start_delete(const std::string& key) {
    const auto t0 = Clock::now();
    try {
        return store_.start_remove(key);
    } catch (const Error& e) {
        failed(key, e, t0);
        return nullptr;
    }
}

bool DeleteQueue::finish_delete(const std::string& key, std::unique_ptr<PendingRemove> pending) {
    if (!pending) return false;  // sending failed: counted and queued for retry already
    const auto t0 = Clock::now();
    try {
        pending->finish();
        bump(stats_.c.deletes);
        trace_(key, "deleted (invalidation)");
        return true;
    } catch (const Error& e) {
        failed(key, e, t0);
        return false;
    }
}

// ---- later ---------------------------------------------------------------------------------

void DeleteQueue::delete_later(const std::string& key, std::chrono::milliseconds delay) {
    const auto due = Clock::now() + delay;
    // The batch is sent up to `slack` after its first key is due (never before): the keys due
    // within it share the pipeline. A tenth of the delay, at most 10 ms, so a stream of writes
    // costs one scheduler wake-up per 10 ms instead of one per write; the C4 window the delay
    // narrows is unchanged (the DEL is later, not earlier, than asked).
    const auto slack = std::min<Clock::duration>(delay / 10, std::chrono::milliseconds(10));
    bool wake = false;
    {
        MutexLock lock(delayed_mutex_);
        delayed_.emplace(due, key);
        delayed_slack_ = slack;
        // One queued task covers every key due at or after it: with one strategy per repository
        // the delay is fixed, so a write stream queues one scheduler task per batch, not per write.
        wake = !delayed_wake_ || due < *delayed_wake_;
        if (wake) delayed_wake_ = due;
    }
    if (wake) schedule_delete_due(due + slack - Clock::now());
}

void DeleteQueue::schedule_delete_due(Clock::duration after) {
    // Rounded up: a task run a fraction of a millisecond early would find nothing due and
    // queue itself again at once.
    scheduler_.run_after(std::chrono::ceil<std::chrono::milliseconds>(after), [weak = self_] {
        if (auto self = weak.lock(); self && !self->closed_) self->delete_due();
    });
}

std::vector<std::string> DeleteQueue::take_due() {
    std::vector<std::string> keys;
    std::optional<Clock::duration> next;
    {
        MutexLock lock(delayed_mutex_);
        const auto now = Clock::now();
        const auto end = delayed_.upper_bound(now);
        for (auto it = delayed_.begin(); it != end; ++it) keys.push_back(std::move(it->second));
        delayed_.erase(delayed_.begin(), end);
        delayed_wake_.reset();
        if (!delayed_.empty()) {
            delayed_wake_ = delayed_.begin()->first;
            next = *delayed_wake_ + delayed_slack_ - now;
        }
    }
    if (next) schedule_delete_due(*next);
    // A key written twice within the delay needs one DEL.
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    return keys;
}

void DeleteQueue::delete_due() {
    const std::vector<std::string> keys = take_due();
    if (keys.empty()) return;
    fault::point(repo_points::before_delayed_delete);
    const auto t0 = Clock::now();
    try {
        store_.remove(keys);  // one pipeline: one DEL per key
        bump(stats_.c.deletes, keys.size());
        for (const auto& k : keys) trace_(k, "deleted (delayed)");
    } catch (const Error& e) {
        for (const auto& k : keys) failed(k, e, t0);
    }
}

// ---- again ---------------------------------------------------------------------------------

void DeleteQueue::enqueue_retry(const std::string& key) {
    bool schedule = false;
    {
        MutexLock lock(retry_mutex_);
        auto [it, inserted] = retries_.try_emplace(key);
        auto& r = it->second;
        ++r.generation;
        // A new failure needs the delete as much as the first did: it may not give up earlier
        // than one entry lifetime after this failure.
        r.give_up_at = std::max(r.give_up_at, Clock::now() + timing_.give_up_after);
        schedule = inserted;
    }
    // Otherwise an attempt for this key is already scheduled and will cover it.
    if (schedule) schedule_retry(key, timing_.retry_initial);
}

void DeleteQueue::schedule_retry(const std::string& key, std::chrono::milliseconds after) {
    scheduler_.run_after(after, [weak = self_, key] {
        if (auto self = weak.lock(); self && !self->closed_) self->retry(key);
    });
}

void DeleteQueue::retry(const std::string& key) {
    std::uint64_t generation = 0;
    int attempts = 0;
    {
        MutexLock lock(retry_mutex_);
        auto it = retries_.find(key);
        if (it == retries_.end()) return;
        generation = it->second.generation;
        attempts = ++it->second.attempts;
    }
    bump(stats_.c.deletes_retried);
    bool landed = false;
    try {
        store_.remove({key});
        landed = true;
        bump(stats_.c.deletes);
    } catch (const Error& e) {
        bump(stats_.c.deletes_failed);
        health_.failed(e, "retried delete of " + key);
    }
    if (auto next = after_attempt(key, generation, attempts, landed)) schedule_retry(key, *next);
}

std::optional<std::chrono::milliseconds> DeleteQueue::after_attempt(const std::string& key,
                                                                    std::uint64_t generation, int attempts,
                                                                    bool landed) {
    MutexLock lock(retry_mutex_);
    auto it = retries_.find(key);
    if (it == retries_.end()) return std::nullopt;
    if (landed && it->second.generation == generation) {
        retries_.erase(it);
        logger()->info("repository '{}': queued delete of {} landed after {} attempt(s)", repository_, key, attempts);
        return std::nullopt;
    }
    if (!landed && Clock::now() >= it->second.give_up_at) {
        retries_.erase(it);
        bump(stats_.c.deletes_abandoned);
        logger()->error("repository '{}': gave up deleting {} after {} attempts; any stale entry has expired by now",
                        repository_, key, attempts);
        return std::nullopt;
    }
    if (landed) return std::chrono::milliseconds(0);  // a newer failure came in meanwhile: once more
    auto backoff = timing_.retry_initial * (1LL << std::min(attempts, 20));
    return std::min<std::chrono::milliseconds>(backoff, timing_.retry_max);
}

}  // namespace lockstep::detail
