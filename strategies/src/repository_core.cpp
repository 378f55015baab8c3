// RepositoryCore: the components of one repository, built in the order they depend on each
// other, and the public calls handed to them. What each component owns is in its header
// (docs/strategies.md, "How the repository is built", lists them).
#include "lockstep/strategies/repository_core.h"

#include "lockstep/cache/redis_near_cache.h"

#include "cache_health.h"
#include "delete_queue.h"
#include "key_lock.h"
#include "key_trace.h"
#include "read_path.h"
#include "replica_reads.h"
#include "repository_config.h"
#include "repository_stats.h"
#include "write_path.h"

namespace lockstep::detail {

// Shared, not owned outright, so that a scheduler task that outlives the RepositoryCore keeps
// the components it uses alive while it runs (DeleteQueue::attach).
struct RepositoryCore::State {
    State(TableSpec spec, MysqlPool& db, std::shared_ptr<EntryStore> store, RepositoryOptions options,
          BackgroundScheduler& scheduler)
        : config(std::move(spec), db, std::move(store), std::move(options)),
          trace(config.name()),
          health(config.name(), config.opts.cache_retry_after, stats),
          replica(db, config.opts.read_replica, config.opts.recent_write_window, *config.store),
          deletes(config.name(), *config.store, scheduler,
                  {config.opts.delete_retry_initial, config.opts.delete_retry_max, config.max_entry_lifetime}, stats,
                  health, trace),
          locks(config.name(), config.opts, config.keys, stats, health, deletes),
          reads(config, replica, stats, health, trace, locks),
          writes({config, replica, stats, health, trace, locks, deletes}) {}

    RepositoryConfig config;
    RepositoryStats stats;
    KeyTrace trace;
    CacheHealth health;
    ReplicaReads replica;
    DeleteQueue deletes;
    KeyLocks locks;
    ReadPath reads;
    WritePath writes;
};

RepositoryCore::RepositoryCore(TableSpec spec, MysqlPool& db, std::shared_ptr<EntryStore> store,
                               RepositoryOptions options)
    : scheduler_(options.scheduler ? options.scheduler : std::make_shared<BackgroundScheduler>()),
      state_(std::make_shared<State>(std::move(spec), db, std::move(store), std::move(options), *scheduler_)) {
    state_->deletes.attach(std::shared_ptr<DeleteQueue>(state_, &state_->deletes));
}

RepositoryCore::~RepositoryCore() {
    state_->deletes.close();
    // An owned scheduler stops here (joins its thread) before the state goes; a shared one
    // keeps running and finds the queue closed.
    scheduler_.reset();
}

std::vector<bool> RepositoryCore::get(const std::vector<std::int64_t>& ids, ValueSink& sink) {
    return state_->reads.get(ids, sink);
}

namespace {
// This process's own write drops its key from the near cache when it returns (or throws: it may
// have committed), not when Redis's message comes back (C12, docs/near-cache.md).
class NearCacheDrop {
public:
    NearCacheDrop(const RepositoryConfig& config, std::int64_t id) : config_(config), id_(id) {}
    NearCacheDrop(const NearCacheDrop&) = delete;
    NearCacheDrop& operator=(const NearCacheDrop&) = delete;
    ~NearCacheDrop() {
        if (config_.opts.near_cache && id_ != 0) config_.opts.near_cache->local().invalidate(config_.keys.value(id_));
    }
    void set_id(std::int64_t id) noexcept { id_ = id; }

private:
    const RepositoryConfig& config_;
    std::int64_t id_;
};
}  // namespace

std::optional<std::int64_t> RepositoryCore::update(std::int64_t id,
                                                   const std::function<ColumnValues(const Row&)>& mutate,
                                                   ValueSink& sink, std::optional<FenceCheck> fence) {
    NearCacheDrop drop(state_->config, id);
    return state_->writes.update(id, mutate, sink, fence);
}

std::int64_t RepositoryCore::insert(std::int64_t id, const ColumnValues& columns, ValueSink& sink) {
    NearCacheDrop drop(state_->config, id);
    const std::int64_t inserted = state_->writes.insert(id, columns, sink);
    drop.set_id(inserted);
    return inserted;
}

bool RepositoryCore::remove(std::int64_t id) {
    NearCacheDrop drop(state_->config, id);
    return state_->writes.remove(id);
}

RepositoryMetrics RepositoryCore::metrics() const {
    RepositoryMetrics m = state_->stats.snapshot();
    m.deletes_pending = state_->deletes.pending();
    m.replica_loads = state_->replica.replica_loads();
    m.primary_loads_recent = state_->replica.primary_loads();
    m.recent_marks_failed = state_->replica.marks_failed();
    if (const auto& near = state_->config.opts.near_cache) {
        const NearCacheStats n = near->local().stats();
        m.near_hits = n.hits;
        m.near_misses = n.misses;
        m.near_drops = n.drops;
        m.near_invalidations = n.invalidations;
        m.near_entries = n.entries;
        m.near_bytes = n.bytes;
    }
    return m;
}

bool RepositoryCore::settle(std::chrono::milliseconds timeout) const { return scheduler_->wait_idle(timeout); }

const EntityKeys& RepositoryCore::keys() const noexcept { return state_->config.keys; }
const RepositoryOptions& RepositoryCore::options() const noexcept { return state_->config.opts; }
EntryStore& RepositoryCore::store() const noexcept { return *state_->config.store; }

}  // namespace lockstep::detail
