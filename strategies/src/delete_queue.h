// The invalidations of one repository, in three kinds:
//   - now: one DEL (or one sent now and collected later, to overlap a round trip);
//   - later: the delayed DELs of DelayedDoubleDelete (C4), batched: delete_later() queues the
//     key and wakes the scheduler only for a new earliest due time; the due keys then go in one
//     pipeline;
//   - again: every DEL that failed goes to the retry queue (C5), retried with exponential
//     backoff until it lands or the longest TTL an entry can have has passed since its last
//     failure (any stale entry has expired by then).
// A DEL is idempotent, so a batch that fails hands every key to the retry queue: one that did
// land costs a repeated DEL, nothing more.
//
// Thread safety: every member may be called from any thread. REQUIRES: attach() before the
// first delete; close() before the owner goes.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache_health.h"
#include "key_trace.h"
#include "lockstep/core/mutex.h"
#include "lockstep/strategies/background_scheduler.h"
#include "lockstep/strategies/entry_store.h"
#include "repository_stats.h"

namespace lockstep::detail {

struct DeleteTiming {
    std::chrono::milliseconds retry_initial;
    std::chrono::milliseconds retry_max;
    // After this long since a key's last failure, its delete is given up.
    std::chrono::milliseconds give_up_after;
};

class DeleteQueue {
public:
    DeleteQueue(std::string repository, EntryStore& store, BackgroundScheduler& scheduler, DeleteTiming timing,
                RepositoryStats& stats, CacheHealth& health, KeyTrace& trace);

    // Scheduler tasks reach the queue through `self`, a pointer that shares its owner's lifetime
    // (a task that runs after the repository is gone finds nothing, or finds the queue closed).
    void attach(std::weak_ptr<DeleteQueue> self) { self_ = std::move(self); }
    // Tasks still queued do nothing from now on. Logs the keys whose delete never landed.
    void close() EXCLUDES(retry_mutex_);

    // DEL now; on failure the key goes to the retry queue. True if it landed.
    bool delete_key(const std::string& key);
    // delete_key in two halves: the DEL sent (nullptr if sending failed: handled as a failed
    // delete), then its reply collected. True if the delete reached Redis.
    std::unique_ptr<PendingRemove> start_delete(const std::string& key);
    bool finish_delete(const std::string& key, std::unique_ptr<PendingRemove> pending);
    // DEL after `delay` (batched with every key due within a small slack, never earlier).
    void delete_later(const std::string& key, std::chrono::milliseconds delay) EXCLUDES(delayed_mutex_);
    // A key whose cache step failed: retried until it lands (C5).
    void enqueue_retry(const std::string& key) EXCLUDES(retry_mutex_);

    // Keys waiting for a retried delete (the deletes_pending gauge).
    std::size_t pending() const EXCLUDES(retry_mutex_);

private:
    struct Retry {
        int attempts = 0;
        std::uint64_t generation = 0;  // bumped by every new failure of this key
        Clock::time_point give_up_at;
    };

    void failed(const std::string& key, const Error& e, Clock::time_point started);
    void delete_due() EXCLUDES(delayed_mutex_);
    // The due keys, taken off the queue; schedules the next batch if keys remain.
    std::vector<std::string> take_due() EXCLUDES(delayed_mutex_);
    void schedule_delete_due(Clock::duration after);
    void retry(const std::string& key) EXCLUDES(retry_mutex_);
    // After an attempt: the delay to the next one, or nullopt when the key is done (landed with
    // no newer failure since, or given up).
    std::optional<std::chrono::milliseconds> after_attempt(const std::string& key, std::uint64_t generation,
                                                           int attempts, bool landed) EXCLUDES(retry_mutex_);
    void schedule_retry(const std::string& key, std::chrono::milliseconds after);

    const std::string repository_;
    EntryStore& store_;
    BackgroundScheduler& scheduler_;
    const DeleteTiming timing_;
    RepositoryStats& stats_;
    CacheHealth& health_;
    KeyTrace& trace_;
    std::weak_ptr<DeleteQueue> self_;
    std::atomic<bool> closed_{false};

    Mutex delayed_mutex_;
    // Due time -> key, of the delayed DELs not sent yet.
    std::multimap<Clock::time_point, std::string> delayed_ GUARDED_BY(delayed_mutex_);
    // The due time the scheduler will next run delete_due() at (none: no task queued).
    std::optional<Clock::time_point> delayed_wake_ GUARDED_BY(delayed_mutex_);
    Clock::duration delayed_slack_ GUARDED_BY(delayed_mutex_){};  // see delete_later()

    mutable Mutex retry_mutex_;
    std::unordered_map<std::string, Retry> retries_ GUARDED_BY(retry_mutex_);
};

}  // namespace lockstep::detail
