// CachedRepository<T>: one entity type, read through a Redis cache, written to MySQL, with the
// write strategy and lock mode chosen per entity.
//
//   lockstep::MysqlPool db(mysql_options);
//   lockstep::RedisClient redis(redis_options);
//   lockstep::CachedRepository<Product> products(product_entity, db, redis, {
//       .strategy = std::make_shared<lockstep::Lease>(),
//       .ttl = std::chrono::minutes(5),
//   });
//   std::optional<Product> p = products.get(42);
//   products.update(42, [](Product& p) { p.price = 1999; });
//
// Reads: a hit returns the cached value; a miss loads the row and backfills it (how depends on
// the strategy); a row that does not exist is cached as "not found" for negative_ttl (C7); one
// reader per key loads at a time across processes (stampede guard, C6). If the cache fails,
// reads are served from the database (logged, counted) and never fail because of it.
//
// Writes: one transaction each (SELECT ... FOR UPDATE, your function, UPDATE ... with the next
// version, the written row re-read), then the strategy's cache step after COMMIT. If the cache
// fails the write still commits; its deletes are queued and retried in the background until
// they land. insert() and update() return what the database stored (DB-managed columns
// included), whatever the strategy.
//
// Errors: database errors surface as DbError (recovery() says whether to retry the transaction);
// a lock that cannot be had within lock_wait fails a write with TimeoutError; a bad entity or
// option, or an entity that does not match the live table, is a ConfigError at construction. A cached entry that does not decode is a miss.
//
// Thread safety: every member may be called from any thread. Two repositories (two entities,
// or two strategies) live side by side in one process.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "lockstep/core/error.h"
#include "lockstep/strategies/binary_codec.h"
#include "lockstep/strategies/entity.h"
#include "lockstep/strategies/entry_store.h"
#include "lockstep/strategies/repository_core.h"
#include "lockstep/strategies/repository_metrics.h"
#include "lockstep/strategies/repository_options.h"

namespace lockstep {

class MysqlPool;
class RedisClient;

template <class T>
class CachedRepository {
public:
    // Over Redis. `db` and `redis` are borrowed and must outlive the repository.
    CachedRepository(Entity<T> entity, MysqlPool& db, RedisClient& redis, RepositoryOptions options = {})
        : CachedRepository(std::move(entity), db, make_redis_entry_store(redis), std::move(options)) {}

    // Over any EntryStore (e.g. make_cache_entry_store over the in-memory Cache, for unit tests).
    CachedRepository(Entity<T> entity, MysqlPool& db, std::shared_ptr<EntryStore> store, RepositoryOptions options = {})
        : entity_(checked(std::move(entity))),
          core_(detail::TableSpec{entity_.name, entity_.table, entity_.key_column, entity_.version_column,
                                  entity_.columns, entity_.read_only_columns, entity_.fence_column},
                db, std::move(store), std::move(options)) {}

    std::optional<T> get(std::int64_t id) {
        auto v = get_versioned(id);
        if (!v) return std::nullopt;
        return std::move(v->value);
    }

    // The value and the row version it was read at; `stale` when it is a cached value past its
    // TTL served while another reader refills it (RepositoryOptions::max_stale).
    std::optional<Versioned<T>> get_versioned(std::int64_t id) {
        Sink sink(*this, 1);
        auto found = core_.get({id}, sink);
        if (!found[0]) return std::nullopt;
        return std::move(*sink.values[0]);
    }

    // One result per id, in order; hits come from one pipelined round trip, misses from one
    // SELECT ... IN (lock modes Mutex and ReadWrite go key by key).
    std::vector<std::optional<T>> get_many(const std::vector<std::int64_t>& ids) {
        Sink sink(*this, ids.size());
        auto found = core_.get(ids, sink);
        std::vector<std::optional<T>> out(ids.size());
        for (std::size_t i = 0; i < ids.size(); ++i) {
            if (found[i]) out[i] = std::move(sink.values[i]->value);
        }
        return out;
    }

    // Inserts `value`; returns what the database stored (the id it chose when the key column
    // is AUTO_INCREMENT and id_of(value) is 0, DB-managed columns). Throws DbError (code 1062)
    // when its id exists.
    T insert(const T& value) {
        Sink sink(*this, 1);
        core_.insert(entity_.id_of(value), entity_.to_columns(value), sink);
        return std::move(sink.values[0]->value);
    }

    // Read-modify-write in one transaction: the row is locked (SELECT ... FOR UPDATE), `fn`
    // changes the value, the row is written with the next version, then the strategy's cache
    // step runs. Returns the value as stored, or nullopt when there is no row. An exception
    // from `fn` rolls back and propagates. `fn` must not change the id (ConfigError).
    template <class Fn>
        requires std::is_invocable_v<Fn&, T&>
    std::optional<T> update(std::int64_t id, Fn&& fn) {
        return update_impl(id, fn, std::nullopt);
    }

    // update() guarded by a fencing token (from any lock: RedisMutex::fence_token(), ...), in
    // the same one transaction: the row's fence column is checked, a token older than the one
    // that last wrote the row is refused with ConflictError (nothing written; RACES L5, L8),
    // otherwise the row gets the next version and `token` as its fence, and the strategy's
    // cache step runs. The same token may write again (one holder, several writes). Needs
    // Entity::fence_column (ConfigError otherwise).
    template <class Fn>
        requires std::is_invocable_v<Fn&, T&>
    std::optional<T> update_fenced(std::int64_t id, std::int64_t token, Fn&& fn) {
        if (entity_.fence_column.empty()) throw ConfigError("entity.fence_column", "update_fenced needs a fence column");
        return update_impl(id, fn, detail::FenceCheck{token});
    }

    // Deletes the row. False when there was none.
    bool remove(std::int64_t id) { return core_.remove(id); }

    RepositoryMetrics metrics() const { return core_.metrics(); }
    // Waits until the delayed and retried deletes queued so far have run (tests, shutdown).
    bool settle(std::chrono::milliseconds timeout) const { return core_.settle(timeout); }
    const EntityKeys& keys() const noexcept { return core_.keys(); }
    std::string key_of(std::int64_t id) const { return core_.keys().value(id); }
    const RepositoryOptions& options() const noexcept { return core_.options(); }
    const Entity<T>& entity() const noexcept { return entity_; }
    EntryStore& store() const noexcept { return core_.store(); }

private:
    template <class Fn>
    std::optional<T> update_impl(std::int64_t id, Fn& fn, std::optional<detail::FenceCheck> fence) {
        Sink sink(*this, 1);
        auto version = core_.update(
            id,
            [&](const Row& row) {
                T value = entity_.from_row(row);
                fn(value);
                if (entity_.id_of(value) != id) throw ConfigError("update", "the function changed the id");
                return entity_.to_columns(value);
            },
            sink, fence);
        if (!version) return std::nullopt;
        return std::move(sink.values[0]->value);
    }

    struct Sink final : detail::ValueSink {
        Sink(const CachedRepository& repo, std::size_t n) : repo(repo), values(n) {}
        void from_cache(std::size_t i, std::int64_t version, std::string_view payload) override {
            values[i] = Versioned<T>{repo.entity_.codec->decode(payload), version};
        }
        void from_db(std::size_t i, std::int64_t version, const Row& row) override {
            values[i] = Versioned<T>{repo.entity_.from_row(row), version};
        }
        std::string encode(std::size_t i) const override { return repo.entity_.codec->encode(values[i]->value); }
        void copy(std::size_t from, std::size_t to) override { values[to] = values[from]; }
        void mark_stale(std::size_t i) override { values[i]->stale = true; }

        const CachedRepository& repo;
        std::vector<std::optional<Versioned<T>>> values;
    };

    static Entity<T> checked(Entity<T> e) {
        if (!e.from_row) throw ConfigError("entity.from_row", "missing");
        if (!e.to_columns) throw ConfigError("entity.to_columns", "missing");
        if (!e.id_of) throw ConfigError("entity.id_of", "missing");
        // The default codec (docs/cache.md, "Codecs"): BinaryCodec when T describes its fields
        // with lockstep_binary_fields (a few varints per read: ~30x cheaper to decode than
        // JSON), JsonCodec otherwise. Set entity.codec to choose explicitly, e.g.
        // JsonCodec for entries a person reads with redis-cli.
        if (!e.codec) {
            if constexpr (BinaryDescribed<T> && std::default_initializable<T>) {
                e.codec = std::make_shared<BinaryCodec<T>>();
            } else if constexpr (JsonConvertible<T>) {
                e.codec = std::make_shared<JsonCodec<T>>();
            } else {
                throw ConfigError("entity.codec",
                                  "missing, and T has neither lockstep_binary_fields (BinaryCodec) nor "
                                  "to_json/from_json (JsonCodec)");
            }
        }
        return e;
    }

    Entity<T> entity_;
    mutable detail::RepositoryCore core_;
};

}  // namespace lockstep
