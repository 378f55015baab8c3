// ReadPath: get() of a repository, from the cache or (on a miss) from the database, filling
// the cache per the strategy's FillMode. The stages and the race each closes are listed at the
// top of read_path.cpp.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cache_health.h"
#include "key_lock.h"
#include "key_trace.h"
#include "replica_reads.h"
#include "repository_config.h"
#include "repository_stats.h"

namespace lockstep::detail {

class ReadPath {
public:
    ReadPath(const RepositoryConfig& config, ReplicaReads& replica, RepositoryStats& stats, CacheHealth& health,
             KeyTrace& trace, KeyLocks& locks)
        : config_(config), replica_(replica), stats_(stats), health_(health), trace_(trace), locks_(locks) {}

    // Reads every id (distinct or not); delivers found items to `sink`; returns, per id, whether
    // it was found.
    std::vector<bool> get(const std::vector<std::int64_t>& ids, ValueSink& sink);

private:
    // What a cached entry turned out to be once delivered.
    enum class Delivered { Value, NotFound, Marker, Corrupt };
    // One distinct id of a get(): its key, and its position in the call.
    struct Item {
        std::int64_t id;
        std::string key;
        std::size_t i;
    };

    // ---- one id ----
    bool read_one(std::int64_t id, ValueSink& sink, std::size_t i);
    // `looked_locally`: the near cache was already asked (and missed) for this read.
    bool read_unlocked(std::int64_t id, const std::string& key, ValueSink& sink, std::size_t i,
                       bool looked_locally = false);
    // With a near cache: a local hit, or a tracked GET that fills it (C12: only if no drop and
    // no invalidation of the key came since the read began) and then the ordinary miss path.
    // nullopt: the near cache cannot be used now (channel down): read the ordinary way.
    std::optional<bool> read_near(std::int64_t id, const std::string& key, ValueSink& sink, std::size_t i,
                                  bool looked_locally);
    // A near cache hit for `key`, delivered and counted; false when there is none.
    bool near_hit(const std::string& key, ValueSink& sink, std::size_t i, Clock::time_point started);
    // A cached entry (or none) as an answer: found / not found, counted as a hit and timed from
    // `started`; nullopt for a miss (counted): the caller resolves it.
    std::optional<bool> answer(const std::string& key, const std::optional<std::string>& entry, ValueSink& sink,
                               std::size_t i, Clock::time_point started);
    // ---- stale-while-revalidate (RepositoryOptions::max_stale) ----
    // read_unlocked() when max_stale is on: the GET also asks the entry's remaining TTL.
    bool read_timed(std::int64_t id, const std::string& key, ValueSink& sink, std::size_t i);
    // A value whose remaining TTL is at most max_stale: past its TTL, inside the stale window.
    bool is_stale(const TimedEntry& entry) const;
    // A stale entry `stale`: the first reader (refill marker) loads and refills it; every other
    // reader gets it at once, marked stale. nullopt: it did not decode (deleted): a miss.
    std::optional<bool> revalidate(std::int64_t id, const std::string& key, const std::string& stale, ValueSink& sink,
                                   std::size_t i, Clock::time_point started);
    // The refiller's fill: lands only if the key still holds `stale` (refill_if_unchanged).
    void refill_one(const std::string& key, const std::string& stale, std::optional<std::int64_t> version,
                    ValueSink& sink, std::size_t i, const std::string& marker);

    // The cache is failing: the database, no fill, counted as a degraded read.
    bool load_degraded(std::int64_t id, ValueSink& sink, std::size_t i);
    bool miss(std::int64_t id, const std::string& key, ValueSink& sink, std::size_t i);
    // Takes `lock` for a read. If it cannot be had (a writer holds the key past lock_wait, or
    // Redis is unreachable) the read goes to the database without filling, and its result is
    // returned; nullopt means the lock is held (or not needed): go on.
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
    Delivered deliver(const std::string& key, const std::string& bytes, ValueSink& sink, std::size_t i);
    void give_back_marker(const std::string& key, const std::string& marker);
    bool uses_marker() const;

    // ---- many ids: the same stages, one round trip per stage for all of them ----
    void read_many(const std::vector<Item>& items, ValueSink& sink, std::vector<bool>& found);
    // Misses as single reads resolve them: under Mutex each under its lock (miss()); otherwise
    // claimed together (when markers are used), loaded and filled together, and the keys another
    // reader is loading waited for one by one (fetch()).
    void resolve_misses(const std::vector<Item>& missed, ValueSink& sink, std::vector<bool>& found);
    void load_degraded(const std::vector<Item>& items, ValueSink& sink, std::vector<bool>& found);
    // `markers`: empty, or the marker claimed for each item (IfMarker fills need it).
    void load_and_fill_many(const std::vector<Item>& items, const std::vector<std::string>& markers,
                            ValueSink& sink, std::vector<bool>& found);
    // SELECT ... IN, in batches of kMaxInBatch; the version per item (nullopt: no row).
    std::vector<std::optional<std::int64_t>> load_many(const std::vector<Item>& items, ValueSink& sink);
    MysqlPool& pool_for(const std::vector<Item>& items, std::size_t start, std::size_t n);

    const RepositoryConfig& config_;
    ReplicaReads& replica_;
    RepositoryStats& stats_;
    CacheHealth& health_;
    KeyTrace& trace_;
    KeyLocks& locks_;
};

}  // namespace lockstep::detail
