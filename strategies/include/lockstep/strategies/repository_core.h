// The untyped part of CachedRepository<T>: read path, write path, strategies, locks, retries,
// metrics. It deals in rows and payload bytes; CachedRepository<T> turns them into T. Not meant
// to be used directly (the API may change); use CachedRepository<T>.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/db/row.h"
#include "lockstep/db/sql_value.h"
#include "lockstep/strategies/entity_keys.h"
#include "lockstep/strategies/entry_store.h"
#include "lockstep/strategies/repository_metrics.h"
#include "lockstep/strategies/repository_options.h"

namespace lockstep {

class MysqlPool;

namespace detail {

// The table side of an Entity<T>.
struct TableSpec {
    std::string name;
    std::string table;
    std::string key_column;
    std::string version_column;
    std::vector<std::string> columns;
    std::vector<std::string> read_only_columns;
    std::string fence_column;
};

// Column values by name (entity.h).
using ColumnValues = std::vector<std::pair<std::string, SqlValue>>;

// A fencing token a write must pass: refused (ConflictError) when the row's fence is newer.
struct FenceCheck {
    std::int64_t token = 0;
};

// Where the core delivers the values of one call, item by item (item = position of an id).
class ValueSink {
public:
    virtual ~ValueSink() = default;
    // A cached payload for item i, read at `version`. Throws when it does not decode.
    virtual void from_cache(std::size_t i, std::int64_t version, std::string_view payload) = 0;
    // A row of item i loaded from the database (holds the key, version and data columns).
    virtual void from_db(std::size_t i, std::int64_t version, const Row& row) = 0;
    // The payload bytes of the value last delivered for item i (to cache it).
    virtual std::string encode(std::size_t i) const = 0;
    // Item `to` gets a copy of item `from` (an id asked for twice in one call).
    virtual void copy(std::size_t from, std::size_t to) = 0;
    // The cached value just delivered for item i is stale (RepositoryOptions::max_stale).
    virtual void mark_stale(std::size_t /*i*/) {}
};

class RepositoryCore {
public:
    RepositoryCore(TableSpec spec, MysqlPool& db, std::shared_ptr<EntryStore> store, RepositoryOptions options);
    ~RepositoryCore();
    RepositoryCore(const RepositoryCore&) = delete;
    RepositoryCore& operator=(const RepositoryCore&) = delete;

    // Reads every id (distinct or not); delivers found items to `sink`; returns, per id, whether
    // it was found.
    std::vector<bool> get(const std::vector<std::int64_t>& ids, ValueSink& sink);

    // SELECT ... FOR UPDATE, `mutate` (locked row -> new column values), UPDATE with the next
    // version (and the fence, when `fence` is given: refused with ConflictError if the row's
    // fence is newer than the token), strategy hooks, all in one transaction. Returns the new
    // version, or nullopt when there is no row. The written row is re-read inside the
    // transaction and delivered to sink item 0.
    std::optional<std::int64_t> update(std::int64_t id, const std::function<ColumnValues(const Row&)>& mutate,
                                       ValueSink& sink, std::optional<FenceCheck> fence = std::nullopt);
    // INSERT at the current version clock; with id 0 on an AUTO_INCREMENT key the database
    // chooses the id. The written row is re-read and delivered to sink item 0. Returns the id.
    // Throws DbError 1062 when the id exists.
    std::int64_t insert(std::int64_t id, const ColumnValues& columns, ValueSink& sink);
    // DELETE. False when there was no row.
    bool remove(std::int64_t id);

    RepositoryMetrics metrics() const;
    bool settle(std::chrono::milliseconds timeout) const;
    const EntityKeys& keys() const noexcept;
    const RepositoryOptions& options() const noexcept;
    EntryStore& store() const noexcept;

    struct State;

private:
    std::shared_ptr<BackgroundScheduler> scheduler_;
    std::shared_ptr<State> state_;
};

}  // namespace detail
}  // namespace lockstep
