// The shared state of one RepositoryCore, and the internal pieces its read path
// (repository_reads.cpp) and write path (repository_writes.cpp) share.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "entity_sql.h"
#include "lockstep/core/logging.h"
#include "entity_table_check.h"
#include "key_space_claim.h"
#include "replica_reads.h"
#include "lockstep/core/error.h"
#include "lockstep/core/latency_histogram.h"
#include "lockstep/core/mutex.h"
#include "lockstep/strategies/cache_entry.h"
#include "lockstep/strategies/repository_core.h"

namespace lockstep {
class MysqlPool;
class DistributedMutex;
class DistributedReadWriteLock;
class LockService;
}  // namespace lockstep

namespace lockstep::detail {

using Clock = std::chrono::steady_clock;

// The repository's own counters: one atomic per LOCKSTEP_COUNTER of repository_metrics.def.
struct Counters {
#define LOCKSTEP_COUNTER(name, help) std::atomic<std::uint64_t> name{0};
#define LOCKSTEP_GAUGE(name, help)
#define LOCKSTEP_REPLICA_COUNTER(name, help)
#include "lockstep/strategies/repository_metrics.def"
};

inline void bump(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }

struct Latencies {
#define LOCKSTEP_HISTOGRAM(name, help) LatencyHistogram name;
#include "lockstep/strategies/repository_metrics.def"
};

// Debug lines that let an operator follow one key through the read and write paths (hit, miss,
// load, fill and why it was refused, invalidation, lock wait), at most `per_second` per
// repository so that turning debug on under load cannot flood the log.
class TraceLimiter {
public:
    bool allow();
    // At most one warning a second (a problem that repeats on every read).
    bool allow_warning();

private:
    std::atomic<std::int64_t> next_warning_{0};
    static constexpr int per_second = 200;
    std::atomic<std::int64_t> window_{0};
    std::atomic<int> used_{0};
};

// What a cached entry turned out to be once delivered.
enum class Delivered { Value, NotFound, Marker, Corrupt };

class KeyLock;  // below: a per-key lock held through the lock client

struct RepositoryCore::State : std::enable_shared_from_this<RepositoryCore::State> {
    State(TableSpec spec, MysqlPool& db, std::shared_ptr<EntryStore> store, RepositoryOptions options,
          BackgroundScheduler& scheduler);

    // ---- configuration (immutable) ----
    TableSpec spec;
    EntitySql sql;
    MysqlPool& db;
    std::shared_ptr<EntryStore> store;
    RepositoryOptions opts;
    std::shared_ptr<const WriteStrategy> strategy;
    EntityKeys keys;
    KeySpaceClaim key_space;
    TableFacts table;
    BackgroundScheduler& scheduler;
    // Makes the per-key locks: opts.lock_service, or a RedisLockService over opts.lock_client.
    std::shared_ptr<LockService> owned_locks;
    LockService* locks = nullptr;
    // The longest an entry can live: after this, a delete that never landed is moot.
    std::chrono::milliseconds max_entry_lifetime{0};
    // Where misses load from (opts.read_replica, C10); never null after construction.
    std::unique_ptr<ReplicaReads> replica;

    Counters c;
    Latencies lat;
    TraceLimiter trace_limit;
    // A debug line about `key`, rate-limited (TraceLimiter).
    template <class... Args>
    void trace(const std::string& key, const char* what, Args&&... args);

    // ---- cache health ----
    // Steady-clock nanoseconds until which reads skip the cache after a connection error.
    std::atomic<std::int64_t> cache_skip_until{0};
    std::atomic<std::int64_t> next_warning{0};  // rate limit of cache-failure warnings
    bool cache_usable() const;
    // Logs (rate-limited), counts, and for connection errors pauses cache use by reads.
    void cache_failed(const Error& e, std::string_view during);

    // ---- read path (repository_reads.cpp) ----
    std::vector<bool> get(const std::vector<std::int64_t>& ids, ValueSink& sink);
    bool read_one(std::int64_t id, ValueSink& sink, std::size_t i);
    bool read_unlocked(std::int64_t id, const std::string& key, ValueSink& sink, std::size_t i);
    bool miss(std::int64_t id, const std::string& key, ValueSink& sink, std::size_t i);
    // Takes `lock` for a read. If it cannot be had (a writer holds the key past lock_wait, or
    // Redis is unreachable) the read goes to the database without filling the cache, and its
    // result is returned; nullopt means the lock is held (or not needed): go on.
    std::optional<bool> lock_or_load(KeyLock& lock, std::int64_t id, ValueSink& sink, std::size_t i);
    bool fetch(std::int64_t id, const std::string& key, ValueSink& sink, std::size_t i);
    // Loads from the database (no fill). The row's version, or nullopt when there is none.
    std::optional<std::int64_t> load(std::int64_t id, ValueSink& sink, std::size_t i);
    bool load_and_fill(std::int64_t id, const std::string& key, ValueSink& sink, std::size_t i,
                       const std::string* marker);
    void fill_one(const std::string& key, std::optional<std::int64_t> version, ValueSink& sink, std::size_t i,
                  const std::string* marker);
    std::optional<Fill> make_fill(const std::string& key, std::optional<std::int64_t> version, ValueSink& sink,
                                  std::size_t i, const std::string* marker);
    void count_fill(FillOutcome outcome);
    Delivered deliver(const std::string& key, const std::string& bytes, ValueSink& sink, std::size_t i);
    void give_back_marker(const std::string& key, const std::string& marker);
    bool uses_marker() const;
    std::chrono::milliseconds value_ttl() const;
    std::chrono::milliseconds negative_ttl() const;

    // ---- write path (repository_writes.cpp) ----
    std::optional<std::int64_t> update(std::int64_t id, const std::function<ColumnValues(const Row&)>& mutate,
                                       ValueSink& sink, std::optional<FenceCheck> fence);
    std::int64_t insert(std::int64_t id, const ColumnValues& columns, ValueSink& sink);
    // The values of `columns`, ordered as spec.columns; ConfigError naming every mismatch.
    SqlParams ordered(const ColumnValues& columns) const;
    bool remove(std::int64_t id);

    // ---- deletes ----
    // DEL now; on failure hand the key to the retry queue. True if it landed.
    bool delete_key(const std::string& key);
    void delete_failed(const std::string& key, const Error& e, Clock::time_point started);
    // delete_key in two halves: the DEL sent (nullptr if sending failed: handled as a failed
    // delete), then its reply collected. True if the delete reached Redis.
    std::unique_ptr<PendingRemove> start_delete(const std::string& key);
    bool finish_delete(const std::string& key, std::unique_ptr<PendingRemove> pending);
    // The delayed DELs (DelayedDoubleDelete) are batched: delete_later() queues the key and
    // wakes the scheduler only for a new earliest due time; delete_due() sends every key due by
    // then in one pipeline (issue 14). A batch that fails hands each of its keys to the retry
    // queue (a DEL is idempotent: one that did land costs a repeated DEL, nothing more).
    void delete_later(const std::string& key, std::chrono::milliseconds delay) EXCLUDES(delayed_mutex);
    void delete_due() EXCLUDES(delayed_mutex);
    // Called by a scheduler task that may outlive this state.
    void schedule_delete_due(Clock::duration after);
    void enqueue_retry(const std::string& key) EXCLUDES(retry_mutex);
    void retry_delete(const std::string& key) EXCLUDES(retry_mutex);

    struct PendingDelete {
        int attempts = 0;
        std::uint64_t generation = 0;  // bumped by every new failure of this key
        Clock::time_point give_up_at;
    };
    Mutex delayed_mutex;
    // Due time -> key, of the delayed DELs not sent yet.
    std::multimap<Clock::time_point, std::string> delayed GUARDED_BY(delayed_mutex);
    // The due time the scheduler will next run delete_due() at (none: no task queued).
    std::optional<Clock::time_point> delayed_wake GUARDED_BY(delayed_mutex);
    Clock::duration delayed_slack GUARDED_BY(delayed_mutex){};  // see delete_later()
    mutable Mutex retry_mutex;
    std::unordered_map<std::string, PendingDelete> pending_deletes GUARDED_BY(retry_mutex);
    std::atomic<bool> closed{false};

    RepositoryMetrics metrics() const EXCLUDES(retry_mutex);
};

template <class... Args>
void RepositoryCore::State::trace(const std::string& key, const char* what, Args&&... args) {
    if (!logger()->should_log(spdlog::level::debug) || !trace_limit.allow()) return;
    logger()->debug("repository '{}': {} {}", spec.name, key, fmt::format(fmt::runtime(what), std::forward<Args>(args)...));
}

// The lock of one key for one operation, per the lock mode. Released explicitly by release();
// the destructor releases too (never throwing) when an exception left the scope.
class KeyLock {
public:
    enum class Side { Shared, Exclusive };
    enum class Outcome { Held, NotNeeded, TimedOut, Unavailable };

    KeyLock(RepositoryCore::State& state, std::int64_t id, Side side);
    ~KeyLock();
    KeyLock(const KeyLock&) = delete;
    KeyLock& operator=(const KeyLock&) = delete;

    Outcome acquire();
    // Unlocks. A hold found lost is counted, logged, and answered with a DEL of the key.
    void release();

private:
    RepositoryCore::State& state_;
    std::int64_t id_;
    Side side_;
    std::unique_ptr<DistributedMutex> mutex_;
    std::unique_ptr<DistributedReadWriteLock> rw_;
    bool held_ = false;
    Clock::time_point held_since_{};
};

// 32 random hex digits.
std::string random_token();

}  // namespace lockstep::detail
