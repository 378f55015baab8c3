// The write path of RepositoryCore: one transaction per write, the strategy's hooks around
// COMMIT, the key's lock around all of it (lock modes Mutex and ReadWrite).
#include "lockstep/core/fault_point.h"
#include "lockstep/core/logging.h"
#include "lockstep/db/transaction.h"
#include "lockstep/strategies/fault_points.h"
#include "lockstep/strategies/outbox.h"
#include "repository_state.h"

namespace lockstep::detail {

namespace {

// The WriteContext a strategy sees for one write.
class CoreWrite final : public WriteContext {
public:
    CoreWrite(RepositoryCore::State& state, Kind kind, std::string key, std::int64_t version,
              std::optional<std::string> entry)
        : state_(state), kind_(kind), key_(std::move(key)), version_(version), entry_(std::move(entry)) {}

    Kind kind() const noexcept override { return kind_; }
    const std::string& key() const noexcept override { return key_; }
    std::int64_t version() const noexcept override { return version_; }

    void delete_now() override { landed_ = state_.delete_key(key_) || landed_; }
    void delete_after(std::chrono::milliseconds delay) override { state_.delete_later(key_, delay); }
    void set_if_newer() override { set(FillMode::IfNewer); }
    void set_unconditionally() override { set(FillMode::Always); }

private:
    void set(FillMode mode) {
        if (!entry_) throw ConfigError("strategy", "set the new value, but no entry was made (needs_entry() is false)");
        Fill f;
        f.key = key_;
        f.entry = *entry_;
        f.ttl = state_.value_ttl();
        f.mode = mode;
        f.version = version_;
        try {
            state_.count_fill(state_.store->fill(f));
            landed_ = true;
        } catch (const Error& e) {
            // The old value may still be cached: make sure it goes, later.
            bump(state_.c.deletes_failed);
            state_.cache_failed(e, "write-through set of " + key_);
            state_.enqueue_retry(key_);
        }
    }

    RepositoryCore::State& state_;
    Kind kind_;
    std::string key_;
    std::int64_t version_;
    std::optional<std::string> entry_;

public:
    // True once a cache operation of this write reached Redis (its outbox row may then go).
    bool landed() const noexcept { return landed_; }

private:
    bool landed_ = false;
};

// Takes the key's exclusive lock for a write. Redis unreachable: the write goes on without it
// (the database row lock still orders writers; the lock only protects the cache, which is down).
void lock_for_write(KeyLock& lock, const RepositoryCore::State& state, std::int64_t id) {
    switch (lock.acquire()) {
        case KeyLock::Outcome::Held:
        case KeyLock::Outcome::NotNeeded: return;
        case KeyLock::Outcome::TimedOut:
            throw TimeoutError("repository '" + state.spec.name + "': lock " + state.keys.lock_name(id) +
                               " not acquired within lock_wait");
        case KeyLock::Outcome::Unavailable:
            logger()->warn("repository '{}': writing {} without its lock (Redis unreachable)", state.spec.name,
                           state.keys.lock_name(id));
            return;
    }
}

// COMMIT, with the fault points around it. When the outcome is unknown (the connection broke
// during COMMIT) the write may have landed: delete the key anyway, then let the error surface.
void commit(Transaction& tx, CoreWrite& write, const WriteStrategy& strategy, Outbox* outbox) {
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

void check_column_count(std::size_t given, std::size_t expected) {
    if (given != expected) {
        throw ConfigError("entity.to_columns", "returned " + std::to_string(given) + " values for " +
                                                   std::to_string(expected) + " columns");
    }
}

// The cache entry of a row just written in `tx`: the row is re-read so the cached bytes are
// exactly what a reader would load (defaults, triggers, column types). Sets `version`.
std::string entry_of_written_row(Transaction& tx, const RepositoryCore::State& state, std::int64_t id,
                                 ValueSink& sink, std::int64_t& version) {
    auto written = tx.query_one(state.sql.select_one, {id});
    if (!written) throw DbError("row " + std::to_string(id) + " vanished inside its own transaction", 0, "");
    version = written->get<std::int64_t>(state.spec.version_column);
    sink.from_db(0, version, *written);
    return CacheEntry::encode_value(version, sink.encode(0));
}

}  // namespace

std::optional<std::int64_t> RepositoryCore::State::update(std::int64_t id,
                                                          const std::function<SqlParams(const Row&)>& mutate,
                                                          ValueSink& sink) {
    KeyLock lock(*this, id, KeyLock::Side::Exclusive);
    lock_for_write(lock, *this, id);
    std::int64_t version = 0;
    {
        Transaction tx(db);
        auto row = tx.query_one(sql.lock_row, {id});
        if (!row) {
            tx.rollback();
            lock.release();
            return std::nullopt;
        }
        SqlParams params = mutate(*row);
        check_column_count(params.size(), spec.columns.size());
        params.push_back(id);
        tx.execute(sql.update, params);
        version = row->get<std::int64_t>(spec.version_column) + 1;
        std::optional<std::string> entry;
        if (strategy->needs_entry()) entry = entry_of_written_row(tx, *this, id, sink, version);
        CoreWrite write(*this, WriteContext::Kind::Update, keys.value(id), version, std::move(entry));
        commit(tx, write, *strategy, opts.outbox.get());
    }
    lock.release();
    return version;
}

std::int64_t RepositoryCore::State::insert(std::int64_t id, const SqlParams& columns, ValueSink& sink) {
    check_column_count(columns.size(), spec.columns.size());
    KeyLock lock(*this, id, KeyLock::Side::Exclusive);
    lock_for_write(lock, *this, id);
    std::int64_t version = 1;
    {
        Transaction tx(db);
        SqlParams params;
        params.reserve(columns.size() + 1);
        params.push_back(id);
        params.insert(params.end(), columns.begin(), columns.end());
        tx.execute(sql.insert, params);
        std::optional<std::string> entry;
        if (strategy->needs_entry()) entry = entry_of_written_row(tx, *this, id, sink, version);
        CoreWrite write(*this, WriteContext::Kind::Insert, keys.value(id), version, std::move(entry));
        commit(tx, write, *strategy, opts.outbox.get());
    }
    lock.release();
    return version;
}

bool RepositoryCore::State::remove(std::int64_t id) {
    KeyLock lock(*this, id, KeyLock::Side::Exclusive);
    lock_for_write(lock, *this, id);
    {
        Transaction tx(db);
        auto row = tx.query_one(sql.lock_version, {id});
        if (!row) {
            tx.rollback();
            lock.release();
            return false;
        }
        const auto version = row->get<std::int64_t>(spec.version_column);
        tx.execute(sql.remove, {id});
        CoreWrite write(*this, WriteContext::Kind::Remove, keys.value(id), version, std::nullopt);
        commit(tx, write, *strategy, opts.outbox.get());
    }
    lock.release();
    return true;
}

}  // namespace lockstep::detail
