// RepositoryCore: construction, cache health, the delete retry queue, locks, metrics.
// The read path is in repository_reads.cpp, the write path in repository_writes.cpp.
#include <algorithm>
#include <random>
#include <sstream>
#include <thread>

#include "lockstep/core/fault_point.h"
#include "lockstep/core/logging.h"
#include "lockstep/locks/lock_service.h"
#include "lockstep/locks/redis_lock_service.h"
#include "lockstep/strategies/fault_points.h"
#include "lockstep/strategies/write_then_delete.h"
#include "repository_state.h"

namespace lockstep::detail {

namespace {

std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

RepositoryOptions validated(RepositoryOptions o) {
    using std::chrono::milliseconds;
    if (!o.strategy) o.strategy = std::make_shared<WriteThenDelete>();
    if (o.ttl <= milliseconds(0)) throw ConfigError("ttl", "must be positive");
    if (o.ttl_jitter < milliseconds(0)) throw ConfigError("ttl_jitter", "must not be negative");
    if (o.negative_ttl < milliseconds(0)) throw ConfigError("negative_ttl", "must not be negative (0 disables)");
    if (o.guard_wait < milliseconds(0)) throw ConfigError("guard_wait", "must not be negative");
    if (o.marker_ttl <= milliseconds(0)) throw ConfigError("marker_ttl", "must be positive");
    if (o.lock_wait < milliseconds(0)) throw ConfigError("lock_wait", "must not be negative");
    if (o.lock_lease < milliseconds(3)) throw ConfigError("lock_lease", "must be at least 3ms");
    if (o.delete_retry_initial <= milliseconds(0)) throw ConfigError("delete_retry_initial", "must be positive");
    if (o.delete_retry_max < o.delete_retry_initial) throw ConfigError("delete_retry_max", "must be >= delete_retry_initial");
    if (o.cache_retry_after < milliseconds(0)) throw ConfigError("cache_retry_after", "must not be negative");
    if (o.lock_mode != LockMode::None && o.lock_service == nullptr && o.lock_client == nullptr) {
        throw ConfigError("lock_service", "lock mode " + std::string(to_string(o.lock_mode)) + " needs a LockService");
    }
    if (o.lock_mode == LockMode::ReadWrite && o.lock_service != nullptr && !o.lock_service->supports_read_write()) {
        throw ConfigError("lock_service", "lock mode ReadWrite needs read-write locks; the " +
                                              std::string(o.lock_service->backend()) + " backend has none");
    }
    return o;
}

}  // namespace

std::string random_token() {
    thread_local std::mt19937_64 rng = [] {
        std::random_device rd;
        std::seed_seq seq{rd(), rd(), rd(), rd(),
                          static_cast<unsigned>(std::hash<std::thread::id>{}(std::this_thread::get_id()))};
        return std::mt19937_64(seq);
    }();
    static constexpr char hex[] = "0123456789abcdef";
    std::string out(32, '0');
    for (int half = 0; half < 2; ++half) {
        std::uint64_t bits = rng();
        for (int j = 0; j < 16; ++j) out[half * 16 + j] = hex[(bits >> (j * 4)) & 0xF];
    }
    return out;
}

RepositoryCore::State::State(TableSpec spec_in, MysqlPool& db_in, std::shared_ptr<EntryStore> store_in,
                             RepositoryOptions options, BackgroundScheduler& scheduler_in)
    : spec(std::move(spec_in)),
      sql(spec),
      db(db_in),
      store(std::move(store_in)),
      opts(validated(std::move(options))),
      strategy(opts.strategy),
      keys(opts.key_prefix, spec.name),
      key_space(opts.key_prefix, spec.name, spec.table),
      table(check_entity_table(spec, db)),
      scheduler(scheduler_in) {
    if (!store) throw ConfigError("store", "missing");
    replica = std::make_unique<ReplicaReads>(db, opts.read_replica, opts.recent_write_window, *store);
    max_entry_lifetime = std::max({opts.ttl + opts.ttl_jitter, opts.negative_ttl, opts.marker_ttl});
    locks = opts.lock_service;
    if (locks == nullptr && opts.lock_client != nullptr) {
        owned_locks = std::make_shared<RedisLockService>(*opts.lock_client);
        locks = owned_locks.get();
    }
}

bool TraceLimiter::allow() {
    const std::int64_t second = now_ns() / 1'000'000'000;
    auto window = window_.load(std::memory_order_relaxed);
    if (window != second && window_.compare_exchange_strong(window, second)) used_.store(0, std::memory_order_relaxed);
    return used_.fetch_add(1, std::memory_order_relaxed) < per_second;
}

bool TraceLimiter::allow_warning() {
    const auto now = now_ns();
    auto next = next_warning_.load(std::memory_order_relaxed);
    return now >= next && next_warning_.compare_exchange_strong(next, now + 1'000'000'000);
}

bool RepositoryCore::State::cache_usable() const {
    return now_ns() >= cache_skip_until.load(std::memory_order_relaxed);
}

void RepositoryCore::State::cache_failed(const Error& e, std::string_view during) {
    bump(c.cache_errors);
    if (dynamic_cast<const ConnectionError*>(&e) != nullptr && opts.cache_retry_after.count() > 0) {
        cache_skip_until.store(now_ns() + std::chrono::nanoseconds(opts.cache_retry_after).count(),
                               std::memory_order_relaxed);
    }
    // One warning per second at most; the rest at debug level (the counter has them all).
    auto now = now_ns();
    auto next = next_warning.load(std::memory_order_relaxed);
    if (now >= next && next_warning.compare_exchange_strong(next, now + 1'000'000'000)) {
        logger()->warn("repository '{}': cache {} failed ({} cache errors so far): {}", spec.name, during,
                       c.cache_errors.load(), e.what());
    } else {
        logger()->debug("repository '{}': cache {} failed: {}", spec.name, during, e.what());
    }
}

// ---- deletes -----------------------------------------------------------------------------

// A delete that did not land: counted, logged, and queued for the retry queue (C5).
void RepositoryCore::State::delete_failed(const std::string& key, const Error& e, Clock::time_point started) {
    lat.cache_error.record(Clock::now() - started);
    bump(c.deletes_failed);
    cache_failed(e, "delete of " + key);
    enqueue_retry(key);
}

bool RepositoryCore::State::delete_key(const std::string& key) {
    const auto t0 = Clock::now();
    try {
        store->remove({key});
        bump(c.deletes);
        trace(key, "deleted (invalidation)");
        return true;
    } catch (const Error& e) {
        delete_failed(key, e, t0);
        return false;
    }
}

std::unique_ptr<PendingRemove> RepositoryCore::State::start_delete(const std::string& key) {
    const auto t0 = Clock::now();
    try {
        return store->start_remove(key);
    } catch (const Error& e) {
        delete_failed(key, e, t0);
        return nullptr;
    }
}

bool RepositoryCore::State::finish_delete(const std::string& key, std::unique_ptr<PendingRemove> pending) {
    if (!pending) return false;  // sending failed: counted and queued for retry already
    const auto t0 = Clock::now();
    try {
        pending->finish();
        bump(c.deletes);
        trace(key, "deleted (invalidation)");
        return true;
    } catch (const Error& e) {
        delete_failed(key, e, t0);
        return false;
    }
}

void RepositoryCore::State::delete_later(const std::string& key, std::chrono::milliseconds delay) {
    const auto due = Clock::now() + delay;
    // The batch is sent up to `slack` after its first key is due (never before): the keys due
    // within it share the pipeline. A tenth of the delay, at most 10 ms, so a stream of writes
    // costs one scheduler wake-up per 10 ms instead of one per write; the C4 window the delay
    // narrows is unchanged (the DEL is later, not earlier, than asked).
    const auto slack = std::min<Clock::duration>(delay / 10, std::chrono::milliseconds(10));
    bool wake = false;
    {
        MutexLock lock(delayed_mutex);
        delayed.emplace(due, key);
        delayed_slack = slack;
        // One queued task covers every key due at or after it: with one strategy per repository
        // the delay is fixed, so a write stream queues one scheduler task per batch, not per write.
        wake = !delayed_wake || due < *delayed_wake;
        if (wake) delayed_wake = due;
    }
    if (wake) schedule_delete_due(due + slack - Clock::now());
}

void RepositoryCore::State::schedule_delete_due(Clock::duration after) {
    std::weak_ptr<State> weak = weak_from_this();
    // Rounded up: a task run a fraction of a millisecond early would find nothing due and
    // queue itself again at once.
    scheduler.run_after(std::chrono::ceil<std::chrono::milliseconds>(after), [weak] {
        if (auto self = weak.lock(); self && !self->closed) self->delete_due();
    });
}

void RepositoryCore::State::delete_due() {
    std::vector<std::string> keys;
    std::optional<Clock::duration> next;
    {
        MutexLock lock(delayed_mutex);
        const auto now = Clock::now();
        const auto end = delayed.upper_bound(now);
        for (auto it = delayed.begin(); it != end; ++it) keys.push_back(std::move(it->second));
        delayed.erase(delayed.begin(), end);
        delayed_wake.reset();
        if (!delayed.empty()) {
            delayed_wake = delayed.begin()->first;
            next = *delayed_wake + delayed_slack - now;
        }
    }
    if (next) schedule_delete_due(*next);
    if (keys.empty()) return;
    // A key written twice within the delay needs one DEL.
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    fault::point(repo_points::before_delayed_delete);
    const auto t0 = Clock::now();
    try {
        store->remove(keys);  // one pipeline: one DEL per key
        bump(c.deletes, keys.size());
        for (const auto& k : keys) trace(k, "deleted (delayed)");
    } catch (const Error& e) {
        for (const auto& k : keys) delete_failed(k, e, t0);
    }
}

void RepositoryCore::State::enqueue_retry(const std::string& key) {
    bool schedule = false;
    {
        MutexLock lock(retry_mutex);
        auto [it, inserted] = pending_deletes.try_emplace(key);
        auto& p = it->second;
        ++p.generation;
        // A new failure needs the delete as much as the first did: it may not give up earlier
        // than one entry lifetime after this failure.
        p.give_up_at = std::max(p.give_up_at, Clock::now() + max_entry_lifetime);
        schedule = inserted;
    }
    if (!schedule) return;  // an attempt for this key is already scheduled and will cover it
    std::weak_ptr<State> weak = weak_from_this();
    scheduler.run_after(opts.delete_retry_initial, [weak, key] {
        if (auto self = weak.lock(); self && !self->closed) self->retry_delete(key);
    });
}

void RepositoryCore::State::retry_delete(const std::string& key) {
    std::uint64_t generation = 0;
    int attempts = 0;
    {
        MutexLock lock(retry_mutex);
        auto it = pending_deletes.find(key);
        if (it == pending_deletes.end()) return;
        generation = it->second.generation;
        attempts = ++it->second.attempts;
    }
    bump(c.deletes_retried);
    bool landed = false;
    try {
        store->remove({key});
        landed = true;
        bump(c.deletes);
    } catch (const Error& e) {
        bump(c.deletes_failed);
        cache_failed(e, "retried delete of " + key);
    }
    std::chrono::milliseconds next_delay{0};
    {
        MutexLock lock(retry_mutex);
        auto it = pending_deletes.find(key);
        if (it == pending_deletes.end()) return;
        if (landed && it->second.generation == generation) {
            pending_deletes.erase(it);
            logger()->info("repository '{}': queued delete of {} landed after {} attempt(s)", spec.name, key, attempts);
            return;
        }
        if (!landed && Clock::now() >= it->second.give_up_at) {
            pending_deletes.erase(it);
            bump(c.deletes_abandoned);
            logger()->error("repository '{}': gave up deleting {} after {} attempts; any stale entry has expired by now",
                            spec.name, key, attempts);
            return;
        }
        if (landed) {
            next_delay = std::chrono::milliseconds(0);  // a newer failure came in meanwhile: once more
        } else {
            auto backoff = opts.delete_retry_initial * (1LL << std::min(attempts, 20));
            next_delay = std::min<std::chrono::milliseconds>(backoff, opts.delete_retry_max);
        }
    }
    std::weak_ptr<State> weak = weak_from_this();
    scheduler.run_after(next_delay, [weak, key] {
        if (auto self = weak.lock(); self && !self->closed) self->retry_delete(key);
    });
}

RepositoryMetrics RepositoryCore::State::metrics() const {
    RepositoryMetrics m;
#define LOCKSTEP_COUNTER(name, help) m.name = c.name.load(std::memory_order_relaxed);
#define LOCKSTEP_GAUGE(name, help)
#define LOCKSTEP_REPLICA_COUNTER(name, help)
#define LOCKSTEP_HISTOGRAM(name, help) m.latency.name = lat.name.snapshot();
#include "lockstep/strategies/repository_metrics.def"
    {
        MutexLock lock(retry_mutex);
        m.deletes_pending = pending_deletes.size();
    }
    m.replica_loads = replica->replica_loads();
    m.primary_loads_recent = replica->primary_loads();
    m.recent_marks_failed = replica->marks_failed();
    return m;
}

// ---- locks -------------------------------------------------------------------------------

KeyLock::KeyLock(RepositoryCore::State& state, std::int64_t id, Side side) : state_(state), id_(id), side_(side) {}

KeyLock::~KeyLock() {
    if (!held_) return;
    try {
        release();
    } catch (const std::exception& e) {
        logger()->error("repository '{}': releasing the lock of {} failed: {}", state_.spec.name,
                        state_.keys.lock_name(id_), e.what());
    }
}

KeyLock::Outcome KeyLock::acquire() {
    const auto& o = state_.opts;
    if (o.lock_mode == LockMode::None) return Outcome::NotNeeded;
    const std::string name = state_.keys.lock_name(id_);
    ScopedLatency waited(&state_.lat.lock_wait);
    try {
        bool got = false;
        if (o.lock_mode == LockMode::Mutex) {
            LockOptions lo;
            lo.lease = o.lock_lease;
            mutex_ = state_.locks->make_mutex(name, lo);
            got = mutex_->try_lock();
            if (!got) {
                bump(state_.c.lock_waits);
                got = mutex_->try_lock_for(o.lock_wait);
            }
        } else {
            LockOptions lo;
            lo.lease = o.lock_lease;
            rw_ = state_.locks->make_read_write_lock(name, lo);
            const bool shared = side_ == Side::Shared;
            got = shared ? rw_->try_lock_shared() : rw_->try_lock();
            if (!got) {
                bump(state_.c.lock_waits);
                got = shared ? rw_->try_lock_shared_for(o.lock_wait) : rw_->try_lock_for(o.lock_wait);
            }
        }
        if (!got) {
            bump(state_.c.lock_timeouts);
            return Outcome::TimedOut;
        }
        held_ = true;
        held_since_ = Clock::now();
        return Outcome::Held;
    } catch (const ConnectionError& e) {
        state_.cache_failed(e, "lock of " + name);
        return Outcome::Unavailable;
    }
}

void KeyLock::release() {
    if (!held_) return;
    held_ = false;
    state_.lat.lock_hold.record(Clock::now() - held_since_);
    const std::string name = state_.keys.lock_name(id_);
    try {
        if (mutex_) {
            mutex_->unlock_checked();
        } else if (side_ == Side::Shared) {
            rw_->unlock_shared_checked();
        } else {
            rw_->unlock_checked();
        }
    } catch (const LockLostError& e) {
        // The lease ran out under us: another reader or writer may have run its cache step
        // inside our critical section. Delete the key so nothing stale we may have caused stays.
        bump(state_.c.locks_lost);
        logger()->warn("repository '{}': lock {} was lost before unlock ({}); deleting {} to be safe",
                       state_.spec.name, name, e.what(), state_.keys.value(id_));
        state_.delete_key(state_.keys.value(id_));
    } catch (const ConnectionError& e) {
        // The hold ends with its lease; count and log.
        state_.cache_failed(e, "unlock of " + name);
    }
}

}  // namespace lockstep::detail

namespace lockstep {
namespace detail {

RepositoryCore::RepositoryCore(TableSpec spec, MysqlPool& db, std::shared_ptr<EntryStore> store,
                               RepositoryOptions options)
    : scheduler_(options.scheduler ? options.scheduler : std::make_shared<BackgroundScheduler>()),
      state_(std::make_shared<State>(std::move(spec), db, std::move(store), std::move(options), *scheduler_)) {}

RepositoryCore::~RepositoryCore() {
    state_->closed = true;
    std::string dropped;
    std::size_t pending = 0;
    {
        MutexLock lock(state_->retry_mutex);
        pending = state_->pending_deletes.size();
        for (const auto& [key, p] : state_->pending_deletes) {
            if (dropped.size() > 400) {
                dropped += ", ...";
                break;
            }
            dropped += (dropped.empty() ? "" : ", ") + key;
        }
    }
    if (pending > 0) {
        logger()->warn("repository '{}' destroyed with {} queued delete(s) not landed; dropping them: {} "
                       "(each entry expires within its TTL)",
                       state_->spec.name, pending, dropped);
    }
    // An owned scheduler stops here (joins its thread) before the state goes; a shared one
    // keeps running and finds this repository closed.
    scheduler_.reset();
}

std::vector<bool> RepositoryCore::get(const std::vector<std::int64_t>& ids, ValueSink& sink) {
    return state_->get(ids, sink);
}

std::optional<std::int64_t> RepositoryCore::update(std::int64_t id,
                                                   const std::function<ColumnValues(const Row&)>& mutate,
                                                   ValueSink& sink, std::optional<FenceCheck> fence) {
    return state_->update(id, mutate, sink, fence);
}

std::int64_t RepositoryCore::insert(std::int64_t id, const ColumnValues& columns, ValueSink& sink) {
    return state_->insert(id, columns, sink);
}

bool RepositoryCore::remove(std::int64_t id) { return state_->remove(id); }

RepositoryMetrics RepositoryCore::metrics() const { return state_->metrics(); }

bool RepositoryCore::settle(std::chrono::milliseconds timeout) const { return scheduler_->wait_idle(timeout); }

const EntityKeys& RepositoryCore::keys() const noexcept { return state_->keys; }
const RepositoryOptions& RepositoryCore::options() const noexcept { return state_->opts; }
EntryStore& RepositoryCore::store() const noexcept { return *state_->store; }

}  // namespace detail
}  // namespace lockstep
