// ConsistencyInspector: a production metric of how often, and for how long, the cache disagrees
// with the database (Uber's Cache Inspector, Meta's Polaris). It follows the binlog as a replica
// of its own (it deletes nothing), samples the changed rows of watched tables, and after
// `check_after` — by when any invalidation (the writer's DEL, the outbox, a BinlogInvalidator)
// should have landed — reads the key: an entry older than the committed row is *stale*. A stale
// entry is re-read every `recheck_every` until it is fresh (deleted, or at least the committed
// version), which measures how long it stayed stale.
//
//   lockstep::ConsistencyInspector inspector(mysql_options, redis,
//       lockstep::InvalidationMap({{.table = "products", .entity = "product"}}),
//       {.server_id = 4343, .sample_rate = 0.01});
//   inspector.compare_content(lockstep::inspected_entity(product_entity()));  // optional, per entity
//   inspector.start();
//   inspector.metrics().stale_per_million  // per million sampled writes
//
// Stale means, for a sampled change whose committed row version is V (the after image's
// `version_column`): a cached value with version < V, or a cached "not found" while the row
// exists; for a deleted row, any cached value. For an entity registered with compare_content()
// (inspected_entity.h) a cached value is also stale when its content differs from the committed
// row's, whatever the versions say: writers outside the library (a plain UPDATE, a trigger,
// db-level fenced_update) leave `version` alone. Markers (a load in progress) and an empty key
// are fresh. The version comparison needs the row's version in the binlog (FULL row images); a
// table without the version column is checked for deletes (and content, when registered) only.
//
// Content is compared with the row as it is when the check runs (read through the repository's
// own SELECT and from_row), not with the binlog image: so a later change of the same key whose
// invalidation may still be on its way would look like staleness. A check that finds different
// content while a newer change of its key arrived less than `check_after` ago is therefore
// deferred to that change's check time (counted once, then).
//
// Near caches (docs/near-cache.md) live in a service's process, so the inspector sees only those
// it is given in its own process (watch_near_cache). For each sampled change of a watched entity
// it then also looks at the local entry at check time — without counting a hit or touching the
// LRU order (NearCache::peek) — and judges it by the same rule: stale when its version is older
// than the committed one, when the row was deleted, or (compare_content) when its content
// differs. A near entry that is absent (invalidated, evicted, past its local TTL) is fresh. Its
// counts are kept apart, in InspectorMetrics::near_cache.
//
// It is a sampler: after a lost connection it resumes from the last transaction it saw, and a
// position that is gone (purged binlogs) restarts it from the server's current one (samples
// lost, nothing else).
//
// Thread safety: compare_content/watch_near_cache/start/stop from one owner thread; metrics()
// from any.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "lockstep/core/mysql_options.h"
#include "lockstep/invalidation/inspected_entity.h"
#include "lockstep/invalidation/invalidation_map.h"

namespace lockstep {

class NearCache;
class RedisClient;
class RedisNearCache;

struct InspectorOptions {
    // Its replica id: distinct from the server's, every follower's and every other inspector's.
    std::uint32_t server_id = 4343;
    // The row version column (what the repository stores as the entry's version).
    std::string version_column = "version";
    // Fraction of changed rows checked, in (0, 1].
    double sample_rate = 1.0;
    // A sampled change is checked this long after the inspector received it: the bound within
    // which invalidation must have landed (a follower's lag, an outbox bound).
    std::chrono::milliseconds check_after{1000};
    // A stale entry is re-read this often until fresh, for at most `track_for` (then it counts
    // as `stale_given_up`: stale for longer than that).
    std::chrono::milliseconds recheck_every{100};
    std::chrono::milliseconds track_for{std::chrono::minutes(2)};
    std::chrono::milliseconds heartbeat{250};
    std::chrono::milliseconds read_timeout{1000};
};

// The counters of one table (InspectorMetrics::tables), or of the entries of the watched near
// caches (InspectorMetrics::near_cache), with the same meanings as below.
struct InspectorTableMetrics {
    std::uint64_t rows_seen = 0;
    std::uint64_t checked = 0;
    std::uint64_t stale = 0;
    std::uint64_t stale_by_content = 0;
    std::uint64_t stale_open = 0;
    std::uint64_t stale_given_up = 0;
    double stale_per_million = 0;
    double staleness_p50_ms = 0;
    double staleness_p99_ms = 0;
    double staleness_max_ms = 0;
};

struct InspectorMetrics {
    std::uint64_t rows_seen = 0;       // changed rows of watched tables (the writes)
    std::uint64_t sampled = 0;         // of those, scheduled for a check
    std::uint64_t checked = 0;         // first checks done
    std::uint64_t stale = 0;           // entries found stale at their first check
    std::uint64_t stale_by_content = 0;  // of those, stale by content while the version said fresh
    std::uint64_t stale_open = 0;      // of those, still stale now (being re-read)
    std::uint64_t stale_given_up = 0;  // stale for longer than track_for
    std::uint64_t check_errors = 0;    // Redis or database reads that failed (the sample is dropped)
    std::uint64_t content_reads = 0;   // committed rows read to compare content
    std::uint64_t deferred = 0;        // checks deferred behind a newer change of their key
    std::uint64_t reconnects = 0;
    // stale / checked, per million.
    double stale_per_million = 0;
    // How long entries found stale stayed stale: change received -> first read found it fresh,
    // over the last 65536 resolved ones.
    double staleness_p50_ms = 0;
    double staleness_p99_ms = 0;
    double staleness_max_ms = 0;
    bool connected = false;
    // The same per watched table, by "database.table" as the binlog names it. Redis entries only.
    std::map<std::string, InspectorTableMetrics> tables;
    // The same for the local entries of the near caches given to watch_near_cache(): rows_seen
    // counts the changes of watched entities once per near cache, checked the local entries
    // judged, stale those found stale (all zero without a watched near cache). check_errors,
    // content_reads and deferred above count these checks too.
    InspectorTableMetrics near_cache;
};

class ConsistencyInspector {
public:
    // `redis` is borrowed and must outlive the inspector. ConfigError on a sample_rate outside
    // (0, 1] or a zero check_after / recheck_every.
    ConsistencyInspector(MysqlOptions mysql, RedisClient& redis, InvalidationMap map, InspectorOptions options = {});
    ~ConsistencyInspector();  // stop()
    ConsistencyInspector(const ConsistencyInspector&) = delete;
    ConsistencyInspector& operator=(const ConsistencyInspector&) = delete;

    // Compares the cached values of `entity` by content too (above). REQUIRES: before start();
    // `entity.entity` and `entity.prefix` name a binding of the map (ConfigError otherwise).
    void compare_content(InspectedEntity entity);
    // Judges the entries of `near` too, for the changes of `entity` cached under key prefix
    // `prefix` (a repository given this near cache in RepositoryOptions::near_cache). It is kept
    // alive while the inspector is. REQUIRES: before start(); `entity` and `prefix` name a
    // binding of the map (ConfigError otherwise).
    void watch_near_cache(const std::string& entity, const std::string& prefix, std::shared_ptr<const NearCache> near);
    void watch_near_cache(const std::string& entity, const std::string& prefix, std::shared_ptr<RedisNearCache> near);
    // Starts following from the server's current position (a reader and a checker thread).
    void start();
    void stop();
    InspectorMetrics metrics() const;
    // Blocks until the stream is connected. False on timeout.
    bool wait_connected(std::chrono::milliseconds timeout);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep
