// RepositoryConfig: the options checked once, and the TTLs derived from them.
#include "repository_config.h"

#include <algorithm>
#include <random>

#include "lockstep/core/error.h"
#include "lockstep/locks/lock_service.h"
#include "lockstep/strategies/write_then_delete.h"

namespace lockstep::detail {

namespace {

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
    if (o.max_stale < milliseconds(0)) throw ConfigError("max_stale", "must not be negative (0 disables)");
    if (o.max_stale > milliseconds(0) && o.near_cache) {
        // The near cache keeps a value until Redis drops the key, which would be past max_stale.
        throw ConfigError("max_stale", "stale-while-revalidate cannot be used with a near cache");
    }
    if (o.lock_mode != LockMode::None && o.lock_service == nullptr) {
        throw ConfigError("lock_service", "lock mode " + std::string(to_string(o.lock_mode)) + " needs a LockService");
    }
    if (o.lock_mode == LockMode::ReadWrite && o.lock_service != nullptr && !o.lock_service->supports_read_write()) {
        throw ConfigError("lock_service", "lock mode ReadWrite needs read-write locks; the " +
                                              std::string(o.lock_service->backend()) + " backend has none");
    }
    return o;
}

}  // namespace

RepositoryConfig::RepositoryConfig(TableSpec spec_in, MysqlPool& db_in, std::shared_ptr<EntryStore> store_in,
                                   RepositoryOptions options)
    : spec(std::move(spec_in)),
      sql(spec),
      db(db_in),
      store(std::move(store_in)),
      opts(validated(std::move(options))),
      strategy(opts.strategy),
      keys(opts.key_prefix, spec.name),
      key_space(opts.key_prefix, spec.name, spec.table),
      table(check_entity_table(spec, db)),
      max_entry_lifetime(std::max({opts.ttl + opts.ttl_jitter + opts.max_stale, opts.negative_ttl, opts.marker_ttl})) {
    if (!store) throw ConfigError("store", "missing");
}

std::chrono::milliseconds RepositoryConfig::value_ttl() const {
    auto ttl = opts.ttl;
    if (opts.ttl_jitter.count() > 0) {
        thread_local std::mt19937_64 rng{std::random_device{}()};
        ttl += std::chrono::milliseconds(std::uniform_int_distribution<long long>(0, opts.ttl_jitter.count())(rng));
    }
    // Stale-while-revalidate: the entry outlives its TTL by max_stale.
    return std::max(strategy->entry_ttl(ttl), std::chrono::milliseconds(1)) + opts.max_stale;
}

std::chrono::milliseconds RepositoryConfig::negative_ttl() const {
    return std::max(strategy->entry_ttl(opts.negative_ttl), std::chrono::milliseconds(1));
}

}  // namespace lockstep::detail
