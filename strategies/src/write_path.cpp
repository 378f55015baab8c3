// The write path of a repository: one transaction per write, the strategy's hooks around
// COMMIT, the key's lock around all of it (lock modes Mutex and ReadWrite).
//
// Every write has the same shape, so a new step goes in one place:
//   lock_for_write  the key's exclusive lock (Mutex, ReadWrite): no reader loads and fills
//                   between our COMMIT and our cache step (C2 closed by locking, C1 too).
//   row step        SELECT ... FOR UPDATE + UPDATE, INSERT, or DELETE; the version is the
//                   database clock's, above every version the id had before, so it never goes
//                   backwards across a delete and re-insert (C11); a fenced update checks the
//                   token under the row lock (L5, L8).
//   reread          the written row as the database stored it: what insert/update return, and
//                   the entry WriteThrough sets (versioned: an older set never overwrites a
//                   newer one, C1).
//   commit          the recently-written marker before COMMIT (C10); the outbox row in the same
//                   transaction (C5); before_commit() -> COMMIT -> after_commit(): the delete
//                   after COMMIT (C3), the delayed second delete on a timer, never in the
//                   writer's thread (C4). A COMMIT whose outcome is unknown still deletes.
//   cache step      a failed delete or set goes to the retry queue (C5, delete_queue.h).
//
// Invariant: the cache never fails a write, and a committed write never leaves its key's old
// entry behind without a delete queued for it.
#include "write_path.h"

#include <map>

#include "lockstep/core/fault_point.h"
#include "lockstep/core/logging.h"
#include "lockstep/db/transaction.h"
#include "lockstep/strategies/cache_entry.h"
#include "lockstep/strategies/fault_points.h"
#include "lockstep/strategies/outbox.h"

namespace lockstep::detail {

namespace {

// The WriteContext a strategy sees for one write.
class CoreWrite final : public WriteContext {
public:
    CoreWrite(const WriteParts& p, Kind kind, std::string key, std::int64_t version,
              std::optional<std::string> entry)
        : p_(p), kind_(kind), key_(std::move(key)), version_(version), entry_(std::move(entry)) {}

    // The strategy's first delete, already sent (deletes_before_commit): the next delete_now()
    // collects its reply instead of sending another DEL. `pending` null: sending failed (counted
    // and queued for retry already).
    void adopt_sent_delete(std::unique_ptr<PendingRemove> pending) {
        sent_delete_ = std::move(pending);
        delete_in_flight_ = true;
    }

    Kind kind() const noexcept override { return kind_; }
    const std::string& key() const noexcept override { return key_; }
    std::int64_t version() const noexcept override { return version_; }

    // C10: misses of this key read the primary for a while (replica_reads.h). Before COMMIT.
    void mark_recent() { p_.replica.mark_written(key_); }

    void delete_now() override {
        if (delete_in_flight_) {
            delete_in_flight_ = false;
            landed_ = p_.deletes.finish_delete(key_, std::move(sent_delete_)) || landed_;
            return;
        }
        landed_ = p_.deletes.delete_key(key_) || landed_;
    }
    void delete_after(std::chrono::milliseconds delay) override { p_.deletes.delete_later(key_, delay); }
    void set_if_newer() override { set(FillMode::IfNewer); }
    void set_unconditionally() override { set(FillMode::Always); }

private:
    void set(FillMode mode) {
        if (!entry_) {
            // The value could not be encoded (entry_of_written_row logged why): the committed
            // write stands, the old entry must not; delete it instead.
            delete_now();
            return;
        }
        Fill f;
        f.key = key_;
        f.entry = *entry_;
        f.ttl = p_.config.value_ttl();
        f.mode = mode;
        f.version = version_;
        const auto t0 = std::chrono::steady_clock::now();
        try {
            const auto outcome = p_.config.store->fill(f);
            p_.stats.lat.fill.record(std::chrono::steady_clock::now() - t0);
            p_.stats.count_fill(outcome);
            p_.trace(key_, "write-through set of v{}: {}", version_,
                         outcome == FillOutcome::Stored      ? "stored"
                         : outcome == FillOutcome::Unchanged ? "unchanged"
                         : outcome == FillOutcome::Cleared   ? "key cleared (nothing older to refresh)"
                                                             : "a higher version was cached: deleted");
            landed_ = true;
        } catch (const Error& e) {
            p_.stats.lat.cache_error.record(std::chrono::steady_clock::now() - t0);
            // The old value may still be cached: make sure it goes, later.
            bump(p_.stats.c.deletes_failed);
            p_.health.failed(e, "write-through set of " + key_);
            p_.deletes.enqueue_retry(key_);
        }
    }

    const WriteParts& p_;
    Kind kind_;
    std::string key_;
    std::int64_t version_;
    std::optional<std::string> entry_;
    std::unique_ptr<PendingRemove> sent_delete_;
    bool delete_in_flight_ = false;

public:
    // True once a cache operation of this write reached Redis (its outbox row may then go).
    bool landed() const noexcept { return landed_; }

private:
    bool landed_ = false;
};

// Takes the key's exclusive lock for a write. Redis unreachable: the write goes on without it
// (the database row lock still orders writers; the lock only protects the cache, which is down).
void lock_for_write(KeyLock& lock, const WriteParts& p, std::int64_t id) {
    switch (lock.acquire()) {
        case KeyLock::Outcome::Held:
        case KeyLock::Outcome::NotNeeded: return;
        case KeyLock::Outcome::TimedOut:
            throw TimeoutError("repository '" + p.config.spec.name + "': lock " + p.config.keys.lock_name(id) +
                               " not acquired within lock_wait");
        case KeyLock::Outcome::Unavailable:
            logger()->warn("repository '{}': writing {} without its lock (Redis unreachable)", p.config.spec.name,
                           p.config.keys.lock_name(id));
            return;
    }
}

// COMMIT, with the fault points around it. When the outcome is unknown (the connection broke
// during COMMIT) the write may have landed: delete the key anyway, then let the error surface.
void commit(Transaction& tx, CoreWrite& write, const WriteStrategy& strategy, Outbox* outbox) {
    write.mark_recent();
    // The outbox row commits with the write or not at all (C5): see outbox.h.
    std::int64_t outbox_row = outbox ? outbox->record(tx, write.key()) : 0;
    strategy.before_commit(write);
    fault::point(repo_points::before_commit);
    try {
        tx.commit();
    } catch (const Error& e) {
        if (e.recovery() == Recovery::RetryCall) write.delete_now();
        throw;
    }
    fault::point(repo_points::after_commit);
    strategy.after_commit(write);
    if (outbox && write.landed()) outbox->done(outbox_row);
}

// The row just written in `tx`, re-read and delivered to sink item 0: insert() and update()
// return what the database stored (defaults, ON UPDATE, generated columns, triggers, type
// conversions), whatever the strategy. When the strategy caches it (needs_entry), also its
// cache entry; nullopt if the codec cannot encode it (the write must not fail for the cache).
std::optional<std::string> reread_written_row(Transaction& tx, const WriteParts& p, std::int64_t id,
                                              ValueSink& sink, std::int64_t& version) {
    auto written = tx.query_one(p.config.sql.select_one, {id});
    if (!written) throw DbError("row " + std::to_string(id) + " vanished inside its own transaction", 0, "");
    version = written->get<std::int64_t>(p.config.spec.version_column);
    sink.from_db(0, version, *written);
    if (!p.config.strategy->needs_entry()) return std::nullopt;
    try {
        return CacheEntry::encode_value(version, sink.encode(0));
    } catch (const std::exception& e) {
        // Every write of this row will hit this: count each, log at most once a second (as reads).
        bump(p.stats.c.cache_errors);
        if (p.trace.allow_warning()) {
            logger()->error("repository '{}': cannot encode row {} for the cache, deleting its entry instead ({} cache "
                            "errors so far): {}",
                            p.config.spec.name, id, p.stats.c.cache_errors.load(), e.what());
        }
        return std::nullopt;
    }
}

// The writes this thread is inside (repository, id). A write of the same id from inside an
// update function would wait for the row lock (and the key lock) its own outer write holds:
// it blocked until a lock timeout and then reported a misleading "lost connection". Refuse it
// at once instead.
class NestedWriteGuard {
public:
    NestedWriteGuard(const WriteParts& p, std::int64_t id) : entry_{&p.config, id} {
        for (const auto& e : active()) {
            if (e == entry_) {
                throw ConfigError("update", "repository '" + p.config.spec.name + "': a write of id " + std::to_string(id) +
                                                " from inside a write of the same id would wait for itself; "
                                                "change the value inside the update function instead");
            }
        }
        active().push_back(entry_);
    }
    ~NestedWriteGuard() {
        auto& a = active();
        for (auto it = a.rbegin(); it != a.rend(); ++it) {
            if (*it == entry_) {
                a.erase(std::next(it).base());
                break;
            }
        }
    }
    NestedWriteGuard(const NestedWriteGuard&) = delete;
    NestedWriteGuard& operator=(const NestedWriteGuard&) = delete;

private:
    using Entry = std::pair<const RepositoryConfig*, std::int64_t>;
    static std::vector<Entry>& active() {
        thread_local std::vector<Entry> a;
        return a;
    }
    Entry entry_;
};

}  // namespace

SqlParams WritePath::ordered(const ColumnValues& values) const {
    std::map<std::string, const SqlValue*> by_name;
    std::string problems;
    auto problem = [&](const std::string& p) { problems += (problems.empty() ? "" : "; ") + p; };
    for (const auto& [name, value] : values) {
        if (!by_name.emplace(name, &value).second) problem("'" + name + "' given twice");
    }
    SqlParams out;
    out.reserve(p_.config.spec.columns.size());
    for (const auto& column : p_.config.spec.columns) {
        auto it = by_name.find(column);
        if (it == by_name.end()) {
            problem("no value for '" + column + "'");
            continue;
        }
        out.push_back(*it->second);
        by_name.erase(it);
    }
    for (const auto& [name, value] : by_name) problem("'" + name + "' is not one of entity.columns");
    if (!problems.empty()) throw ConfigError("entity.to_columns", "repository '" + p_.config.spec.name + "': " + problems);
    return out;
}

std::optional<std::int64_t> WritePath::update(std::int64_t id,
                                                          const std::function<ColumnValues(const Row&)>& mutate,
                                                          ValueSink& sink, std::optional<FenceCheck> fence) {
    if (fence && p_.config.spec.fence_column.empty()) throw ConfigError("entity.fence_column", "a fenced update needs one");
    ScopedLatency timed(&p_.stats.lat.write);
    NestedWriteGuard nested(p_, id);
    KeyLock lock(p_.locks, id, KeyLock::Side::Exclusive);
    lock_for_write(lock, p_, id);
    std::int64_t version = 0;
    {
        Transaction tx(p_.config.db);
        auto row = tx.query_one(p_.config.sql.lock_row, {id});
        if (!row) {
            tx.rollback();
            lock.release();
            return std::nullopt;
        }
        if (fence) {
            // L5, L8: a holder whose lock expired (paused, partitioned) and was taken over
            // carries an older token than the one that wrote the row since. The row lock of the
            // SELECT ... FOR UPDATE makes check and write one step.
            const auto row_fence = row->get<std::int64_t>(p_.config.spec.fence_column);
            if (row_fence > fence->token) {
                throw ConflictError("repository '" + p_.config.spec.name + "': fenced update of " + std::to_string(id) +
                                    " refused: fencing token " + std::to_string(fence->token) +
                                    " is stale, the row was written under token " + std::to_string(row_fence));
            }
        }
        // DelayedDoubleDelete's first DEL goes out now, with the row locked and nothing written
        // yet, and its reply is collected in before_commit(): the UPDATE's round trip hides the
        // DEL's. C3 is unchanged: the delete still precedes COMMIT, and the
        // strategy's delete after COMMIT is what closes C3.
        std::unique_ptr<PendingRemove> early_delete;
        const bool early = p_.config.strategy->deletes_before_commit();
        if (early) early_delete = p_.deletes.start_delete(p_.config.keys.value(id));
        SqlParams params = ordered(mutate(*row));
        version = next_version(row->get<std::int64_t>(p_.config.spec.version_column), row->get<std::int64_t>(kClockName));
        params.push_back(version);
        if (fence) params.push_back(fence->token);
        params.push_back(id);
        tx.execute(fence ? p_.config.sql.update_fenced : p_.config.sql.update, params);
        auto entry = reread_written_row(tx, p_, id, sink, version);
        CoreWrite write(p_, WriteContext::Kind::Update, p_.config.keys.value(id), version, std::move(entry));
        if (early) write.adopt_sent_delete(std::move(early_delete));
        commit(tx, write, *p_.config.strategy, p_.config.opts.outbox.get());
    }
    lock.release();
    return version;
}

std::int64_t WritePath::insert(std::int64_t id, const ColumnValues& columns, ValueSink& sink) {
    SqlParams values = ordered(columns);
    ScopedLatency timed(&p_.stats.lat.write);
    const bool generated = id == 0 && p_.config.table.generated_key;
    if (generated) {
        // The id is not known before the INSERT, so there is no key to lock: nothing can have
        // cached a row that does not exist yet, but a "not found" for the id the database will
        // choose might be; the strategy's step after COMMIT handles it as for any insert.
        std::int64_t version = 0;
        Transaction tx(p_.config.db);
        version = next_version(0, tx.query_one(p_.config.sql.clock, {})->get<std::int64_t>(kClockName));
        SqlParams params;
        params.reserve(values.size() + 1);
        params.push_back(version);
        params.insert(params.end(), values.begin(), values.end());
        tx.execute(p_.config.sql.insert_generated, params);
        id = tx.query_one(p_.config.sql.last_insert_id, {})->get<std::int64_t>("id");
        auto entry = reread_written_row(tx, p_, id, sink, version);
        CoreWrite write(p_, WriteContext::Kind::Insert, p_.config.keys.value(id), version, std::move(entry));
        commit(tx, write, *p_.config.strategy, p_.config.opts.outbox.get());
        return id;
    }
    KeyLock lock(p_.locks, id, KeyLock::Side::Exclusive);
    lock_for_write(lock, p_, id);
    {
        std::int64_t version = 0;
        Transaction tx(p_.config.db);
        // C11: a re-inserted id continues above the versions of the row it replaces.
        version = next_version(0, tx.query_one(p_.config.sql.clock, {})->get<std::int64_t>(kClockName));
        SqlParams params;
        params.reserve(values.size() + 2);
        params.push_back(id);
        params.push_back(version);
        params.insert(params.end(), values.begin(), values.end());
        tx.execute(p_.config.sql.insert, params);
        auto entry = reread_written_row(tx, p_, id, sink, version);
        CoreWrite write(p_, WriteContext::Kind::Insert, p_.config.keys.value(id), version, std::move(entry));
        commit(tx, write, *p_.config.strategy, p_.config.opts.outbox.get());
    }
    lock.release();
    return id;
}

bool WritePath::remove(std::int64_t id) {
    ScopedLatency timed(&p_.stats.lat.write);
    NestedWriteGuard nested(p_, id);
    KeyLock lock(p_.locks, id, KeyLock::Side::Exclusive);
    lock_for_write(lock, p_, id);
    {
        Transaction tx(p_.config.db);
        auto row = tx.query_one(p_.config.sql.lock_version, {id});
        if (!row) {
            tx.rollback();
            lock.release();
            return false;
        }
        const auto version = row->get<std::int64_t>(p_.config.spec.version_column);
        tx.execute(p_.config.sql.remove, {id});
        CoreWrite write(p_, WriteContext::Kind::Remove, p_.config.keys.value(id), version, std::nullopt);
        commit(tx, write, *p_.config.strategy, p_.config.opts.outbox.get());
    }
    lock.release();
    return true;
}

}  // namespace lockstep::detail
