// The read path of a repository: a GET, then on a miss the stages that load the row and fill
// the entry, each closing one race of RACES.md (docs/races.md):
//
//   read_one      ReadWrite: the key's shared lock around the read, so no write's cache step
//                 runs between our database read and our fill (C2 closed by locking).
//   read_unlocked GET; a value or a cached "not found" (C7) answers; a marker or nothing is a
//                 miss; an entry that does not decode is deleted only if unchanged (deliver).
//   miss          Mutex: the key's lock, then the entry read again under it (the holder we
//                 waited for may have filled it): one loader per key by locking (C6, C2).
//   fetch         one loader per key across processes by marker (C6): the claim puts a marker;
//                 the others poll for the value for at most guard_wait, then read the database
//                 without filling. Under Lease the marker is the lease: a write's DEL removes
//                 it, and the fill that needs it is refused (C2, C4 for any delay).
//   load          the row from the primary, or from the replica unless the key was written
//                 recently (C10).
//   fill_one      the entry, stored only if no newer version is cached (IfNewer: C1, C11) or
//                 only if our marker is still there (IfMarker: C2); versions come from the
//                 row's own version column, never from the reader's clock.
//   revalidate    with max_stale, a value past its TTL (remaining TTL <= max_stale) is stale:
//                 one reader per key (a marker in `<key>:refill`) loads and refills it, and its
//                 fill lands only if the key still holds the stale entry it saw (a write since
//                 then deleted or replaced it: C2); the others get the stale value at once.
//                 A write's DEL leaves nothing to serve: a stale value is never one a write
//                 invalidated (C2, C11).
//   read_near     with a near cache, before all of the above: a local hit costs no round trip;
//                 otherwise the GET goes through a tracked connection and its value fills the
//                 near cache only if the ticket taken before it is still good (C12).
//
// Which of these races a repository closes depends on its strategy and lock mode (the matrix in
// docs/strategies.md). Whatever they are: a read whose cache step failed reads the database and
// does not fill; a fill carries the row's version and the strategy's FillMode, and the store's
// script decides whether it lands; every hit records the hit latency, every miss the miss one.
#include "read_path.h"

#include <algorithm>
#include <random>
#include <thread>
#include <unordered_map>

#include "lockstep/cache/redis_near_cache.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/core/logging.h"
#include "lockstep/strategies/cache_entry.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/strategies/fault_points.h"

namespace lockstep::detail {

namespace {
constexpr std::chrono::milliseconds kFirstPoll{1};
constexpr std::chrono::milliseconds kMaxPoll{25};
constexpr int kMaxCorruptRetries = 3;

// 32 random hex digits: a marker's token.
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
}  // namespace

bool ReadPath::uses_marker() const {
    if (config_.strategy->fill_mode() == FillMode::IfMarker) return true;  // the lease itself
    // Under Mutex the lock already makes one loader per key; a marker would add nothing.
    return config_.opts.stampede_guard && config_.opts.lock_mode != LockMode::Mutex;
}

ReadPath::Delivered ReadPath::deliver(const std::string& key, const std::string& bytes, ValueSink& sink,
                                         std::size_t i) {
    auto entry = CacheEntry::decode(bytes);
    std::string problem;
    if (!entry) {
        problem = "not a lockstep cache entry";
    } else if (entry->kind == CacheEntry::Kind::NotFound) {
        return Delivered::NotFound;
    } else if (entry->kind == CacheEntry::Kind::Marker) {
        return Delivered::Marker;
    } else {
        try {
            sink.from_cache(i, entry->version, entry->payload);
            return Delivered::Value;
        } catch (const std::exception& e) {
            problem = std::string("payload does not decode: ") + e.what();
        }
    }
    // Undecodable: a miss. Delete it only if it still holds these bytes (someone may have
    // replaced it with a good entry meanwhile).
    bump(stats_.c.decode_errors);
    logger()->warn("repository '{}': deleting cache entry {} ({} bytes): {}", config_.spec.name, key, bytes.size(), problem);
    try {
        config_.store->remove_if_equals(key, bytes);
    } catch (const Error& e) {
        health_.failed(e, "delete of an undecodable entry");
    }
    return Delivered::Corrupt;
}

std::optional<std::int64_t> ReadPath::load(std::int64_t id, ValueSink& sink, std::size_t i) {
    auto row = (replica_.enabled() ? replica_.pool_for(config_.keys.value(id)) : config_.db).query_one(config_.sql.select_one, {id});
    bump(stats_.c.loads);
    if (logger()->should_log(spdlog::level::debug)) trace_(config_.keys.value(id), "loaded from the database ({})", row ? "row" : "no row");
    fault::point(repo_points::after_db_read);
    if (!row) return std::nullopt;
    const std::int64_t version = row->get<std::int64_t>(config_.spec.version_column);
    sink.from_db(i, version, *row);
    return version;
}

std::optional<Fill> ReadPath::make_fill(const std::string& key, std::optional<std::int64_t> version,
                                                     ValueSink& sink, std::size_t i, const std::string* marker) {
    Fill f;
    f.key = key;
    if (version) {
        try {
            f.entry = CacheEntry::encode_value(*version, sink.encode(i));
        } catch (const std::exception& e) {
            // The value is good (it came from the database); only caching it is impossible.
            // Every read of this key will hit this: count each, log at most once a second.
            bump(stats_.c.cache_errors);
            if (trace_.allow_warning()) {
                logger()->warn("repository '{}': cannot encode the value of {} for the cache ({} cache errors so far): {}",
                               config_.spec.name, key, stats_.c.cache_errors.load(), e.what());
            }
            return std::nullopt;
        }
        f.ttl = config_.value_ttl();
        f.version = version;
    } else {
        if (config_.opts.negative_ttl.count() == 0) return std::nullopt;
        f.entry = CacheEntry::encode_not_found();
        f.ttl = config_.negative_ttl();
    }
    f.mode = config_.strategy->fill_mode();
    if (f.mode == FillMode::IfMarker) {
        if (marker == nullptr) return std::nullopt;  // Lease: no marker, no fill
        f.marker = *marker;
    }
    return f;
}

void ReadPath::fill_one(const std::string& key, std::optional<std::int64_t> version, ValueSink& sink,
                                     std::size_t i, const std::string* marker) {
    auto f = make_fill(key, version, sink, i, marker);
    if (!f) {
        if (marker) give_back_marker(key, *marker);
        return;
    }
    const auto t0 = Clock::now();
    try {
        const auto outcome = config_.store->fill(*f);
        stats_.lat.fill.record(Clock::now() - t0);
        stats_.count_fill(outcome);
        if (outcome == FillOutcome::Refused) {
            trace_(key, "fill of v{} refused: {}", version.value_or(0),
                  f->mode == FillMode::IfMarker ? "the reader's marker is gone (a write or an eviction since the miss)"
                                                : "a newer version is cached");
        } else {
            trace_(key, "filled v{}", version.value_or(0));
        }
    } catch (const Error& e) {
        stats_.lat.cache_error.record(Clock::now() - t0);
        health_.failed(e, "backfill of " + key);
    }
}

void ReadPath::give_back_marker(const std::string& key, const std::string& marker) {
    try {
        config_.store->remove_if_equals(key, marker);
    } catch (const Error& e) {
        health_.failed(e, "release of a marker");  // it expires with marker_ttl anyway
    }
}

bool ReadPath::load_and_fill(std::int64_t id, const std::string& key, ValueSink& sink, std::size_t i,
                                          const std::string* marker) {
    std::optional<std::int64_t> version;
    try {
        version = load(id, sink, i);
    } catch (...) {
        // Let the waiters load for themselves now rather than after marker_ttl.
        if (marker) give_back_marker(key, *marker);
        throw;
    }
    fill_one(key, version, sink, i, marker);
    return version.has_value();
}

// A miss, after the lock (if any): one loader per key (marker), the others wait for its value.
bool ReadPath::fetch(std::int64_t id, const std::string& key, ValueSink& sink, std::size_t i) {
    if (!uses_marker()) return load_and_fill(id, key, sink, i, nullptr);

    bool waiting = false;
    Clock::time_point deadline{};
    auto poll = kFirstPoll;
    int corrupt = 0;
    for (;;) {
        const std::string marker = CacheEntry::encode_marker(random_token());
        Claim claim;
        try {
            claim = config_.store->claim(key, marker, config_.opts.marker_ttl);
        } catch (const Error& e) {
            health_.failed(e, "claim of " + key);
            return load_degraded(id, sink, i);
        }
        if (claim.result == Claim::Result::Claimed) return load_and_fill(id, key, sink, i, &marker);
        if (claim.result == Claim::Result::Present) {
            switch (deliver(key, claim.entry, sink, i)) {
                case Delivered::Value: return true;
                case Delivered::NotFound: return false;
                case Delivered::Marker:  // cannot happen (the script reports markers as busy)
                case Delivered::Corrupt:
                    if (++corrupt > kMaxCorruptRetries) return load(id, sink, i).has_value();
                    continue;
            }
        }
        // Busy: another reader is loading this key.
        if (!config_.opts.stampede_guard) return load(id, sink, i).has_value();  // Lease without waiting
        if (!waiting) {
            waiting = true;
            bump(stats_.c.guard_waits);
            deadline = Clock::now() + config_.opts.guard_wait;
        }
        bool claim_again = false;
        while (!claim_again) {
            const auto now = Clock::now();
            if (now >= deadline) {
                // The loader is slow or gone: read for ourselves, but do not fill (the loader's
                // fill, or the next reader's, will).
                bump(stats_.c.guard_timeouts);
                return load(id, sink, i).has_value();
            }
            std::this_thread::sleep_for(std::min<Clock::duration>(poll, deadline - now));
            poll = std::min(poll * 2, kMaxPoll);
            std::optional<std::string> entry;
            try {
                entry = config_.store->get(key);
            } catch (const Error& e) {
                health_.failed(e, "read of " + key);
                return load_degraded(id, sink, i);
            }
            if (!entry) {
                claim_again = true;  // the loader gave up, or a write deleted its marker
                continue;
            }
            switch (deliver(key, *entry, sink, i)) {
                case Delivered::Value: return true;
                case Delivered::NotFound: return false;
                case Delivered::Marker: break;  // still loading
                case Delivered::Corrupt: claim_again = true; break;
            }
        }
    }
}

std::optional<bool> ReadPath::lock_or_load(KeyLock& lock, std::int64_t id, ValueSink& sink,
                                                      std::size_t i) {
    switch (lock.acquire()) {
        case KeyLock::Outcome::Held:
        case KeyLock::Outcome::NotNeeded: return std::nullopt;
        case KeyLock::Outcome::TimedOut: break;  // held longer than lock_wait: read without filling
        case KeyLock::Outcome::Unavailable: bump(stats_.c.degraded_reads); break;
    }
    return load(id, sink, i).has_value();
}

bool ReadPath::miss(std::int64_t id, const std::string& key, ValueSink& sink, std::size_t i) {
    if (config_.opts.lock_mode != LockMode::Mutex) return fetch(id, key, sink, i);
    KeyLock lock(locks_, id, KeyLock::Side::Exclusive);
    if (auto loaded = lock_or_load(lock, id, sink, i)) return *loaded;
    // Re-check under the lock: the holder we waited for may have filled it.
    std::optional<std::string> entry;
    try {
        entry = config_.store->get(key);
    } catch (const Error& e) {
        health_.failed(e, "read of " + key);
        bool found = load_degraded(id, sink, i);
        lock.release();
        return found;
    }
    if (entry) {
        switch (deliver(key, *entry, sink, i)) {
            case Delivered::Value: lock.release(); return true;
            case Delivered::NotFound: lock.release(); return false;
            case Delivered::Marker:
            case Delivered::Corrupt: break;
        }
    }
    bool found = fetch(id, key, sink, i);
    lock.release();
    return found;
}

std::optional<bool> ReadPath::answer(const std::string& key, const std::optional<std::string>& entry,
                                     ValueSink& sink, std::size_t i, Clock::time_point started) {
    if (entry) {
        switch (deliver(key, *entry, sink, i)) {
            case Delivered::Value:
                bump(stats_.c.hits);
                stats_.lat.hit.record(Clock::now() - started);
                trace_(key, "hit");
                return true;
            case Delivered::NotFound:
                bump(stats_.c.negative_hits);
                stats_.lat.hit.record(Clock::now() - started);
                trace_(key, "hit (not found)");
                return false;
            case Delivered::Marker: break;  // someone is loading: fetch() waits for it
            case Delivered::Corrupt: break;
        }
    }
    bump(stats_.c.misses);
    trace_(key, "miss");
    return std::nullopt;
}

bool ReadPath::load_degraded(std::int64_t id, ValueSink& sink, std::size_t i) {
    bump(stats_.c.degraded_reads);
    return load(id, sink, i).has_value();
}

bool ReadPath::near_hit(const std::string& key, ValueSink& sink, std::size_t i, Clock::time_point started) {
    NearCache& near = config_.opts.near_cache->local();
    try {
        // Decoded under the near cache's lock: no copy of the payload.
        if (!near.visit(key, [&](std::int64_t version, std::string_view payload) { sink.from_cache(i, version, payload); }))
            return false;
    } catch (const std::exception&) {
        near.invalidate(key);  // cannot decode any more: ask Redis
        return false;
    }
    bump(stats_.c.hits);
    stats_.lat.hit.record(Clock::now() - started);
    return true;
}

std::optional<bool> ReadPath::read_near(std::int64_t id, const std::string& key, ValueSink& sink, std::size_t i,
                                        bool looked_locally) {
    RedisNearCache& near = *config_.opts.near_cache;
    const auto t0 = Clock::now();
    if (!looked_locally && near_hit(key, sink, i, t0)) return true;
    if (!health_.usable() || !near.channel().intact()) return std::nullopt;
    // Taken before the read: a drop or an invalidation of this key from now on refuses the fill.
    const NearCache::Ticket ticket = near.local().begin_fill(key);
    std::optional<std::string> entry;
    try {
        entry = near.channel().tracked_get(key);
    } catch (const Error& e) {
        // The channel went down, or Redis did: the ordinary path reads (and counts) it.
        logger()->debug("repository '{}': tracked read of {} failed: {}", config_.spec.name, key, e.what());
        return std::nullopt;
    }
    if (entry) {
        // A value: decoded once, delivered, and its payload moved into the near cache.
        auto decoded = CacheEntry::decode(*entry);
        if (decoded && decoded->kind == CacheEntry::Kind::Value) {
            bool delivered = true;
            try {
                sink.from_cache(i, decoded->version, decoded->payload);
            } catch (const std::exception&) {
                delivered = false;  // answer() below deletes it and counts the decode error
            }
            if (delivered) {
                bump(stats_.c.hits);
                stats_.lat.hit.record(Clock::now() - t0);
                trace_(key, "hit (filling the near cache)");
                near.local().fill(key, ticket, decoded->version, std::move(decoded->payload));
                return true;
            }
        }
    }
    if (auto answered = answer(key, entry, sink, i, t0)) return *answered;
    const bool found = miss(id, key, sink, i);
    stats_.lat.miss_load.record(Clock::now() - t0);
    return found;
}

bool ReadPath::is_stale(const TimedEntry& entry) const {
    return entry.ttl_left.count() >= 0 && entry.ttl_left <= config_.opts.max_stale && !entry.entry.empty() &&
           entry.entry[0] == 'v';
}

void ReadPath::refill_one(const std::string& key, const std::string& stale, std::optional<std::int64_t> version,
                          ValueSink& sink, std::size_t i, const std::string& marker) {
    auto f = make_fill(key, version, sink, i, &marker);
    const auto t0 = Clock::now();
    try {
        if (!f) {
            // Nothing to cache (no row and no negative caching, or the value does not encode):
            // the stale entry must not be served again after what the database said.
            config_.store->remove_if_equals(key, stale);
            config_.store->remove_if_equals(refill_key_of(key), marker);
            return;
        }
        const auto outcome = config_.store->refill(key, stale, f->entry, f->ttl, marker);
        stats_.lat.fill.record(Clock::now() - t0);
        stats_.count_fill(outcome);
        if (outcome == FillOutcome::Refused) {
            trace_(key, "refill of v{} refused: the stale entry was deleted or replaced since the read began",
                   version.value_or(0));
        } else {
            trace_(key, "refilled v{}", version.value_or(0));
        }
    } catch (const Error& e) {
        stats_.lat.cache_error.record(Clock::now() - t0);
        health_.failed(e, "refill of " + key);  // the refill marker expires with marker_ttl
    }
}

std::optional<bool> ReadPath::revalidate(std::int64_t id, const std::string& key, const std::string& stale,
                                         ValueSink& sink, std::size_t i, Clock::time_point started) {
    const std::string marker = CacheEntry::encode_marker(random_token());
    bool refiller = false;
    try {
        refiller = config_.store->claim_refill(key, marker, config_.opts.marker_ttl);
    } catch (const Error& e) {
        health_.failed(e, "refill claim of " + key);
        return load_degraded(id, sink, i);
    }
    if (!refiller) {
        // Another reader is refilling it: the stale value, at once.
        if (deliver(key, stale, sink, i) != Delivered::Value) return std::nullopt;
        sink.mark_stale(i);
        bump(stats_.c.stale_served);
        stats_.lat.hit.record(Clock::now() - started);
        trace_(key, "stale value served (a refill is running)");
        return true;
    }
    bump(stats_.c.misses);
    trace_(key, "stale: refilling");
    std::optional<std::int64_t> version;
    try {
        version = load(id, sink, i);
    } catch (...) {
        // Let the next reader refill now rather than after marker_ttl.
        give_back_marker(refill_key_of(key), marker);
        throw;
    }
    refill_one(key, stale, version, sink, i, marker);
    stats_.lat.miss_load.record(Clock::now() - started);
    return version.has_value();
}

bool ReadPath::read_timed(std::int64_t id, const std::string& key, ValueSink& sink, std::size_t i) {
    const auto t0 = Clock::now();
    std::optional<TimedEntry> timed;
    try {
        timed = config_.store->get_timed(key);
    } catch (const Error& e) {
        stats_.lat.cache_error.record(Clock::now() - t0);
        health_.failed(e, "read of " + key);
        return load_degraded(id, sink, i);
    }
    std::optional<std::string> entry;
    if (timed) {
        if (is_stale(*timed)) {
            if (auto answered = revalidate(id, key, timed->entry, sink, i, t0)) return *answered;
        } else {
            entry = std::move(timed->entry);
        }
    }
    if (auto answered = answer(key, entry, sink, i, t0)) return *answered;
    const bool found = miss(id, key, sink, i);
    stats_.lat.miss_load.record(Clock::now() - t0);
    return found;
}

bool ReadPath::read_unlocked(std::int64_t id, const std::string& key, ValueSink& sink, std::size_t i,
                             bool looked_locally) {
    if (config_.opts.near_cache) {
        if (auto answered = read_near(id, key, sink, i, looked_locally)) return *answered;
    }
    if (!health_.usable()) return load_degraded(id, sink, i);
    if (config_.opts.max_stale.count() > 0) return read_timed(id, key, sink, i);
    const auto t0 = Clock::now();
    std::optional<std::string> entry;
    try {
        entry = config_.store->get(key);
    } catch (const Error& e) {
        stats_.lat.cache_error.record(Clock::now() - t0);
        health_.failed(e, "read of " + key);
        return load_degraded(id, sink, i);
    }
    if (auto answered = answer(key, entry, sink, i, t0)) return *answered;
    const bool found = miss(id, key, sink, i);
    stats_.lat.miss_load.record(Clock::now() - t0);
    return found;
}

bool ReadPath::read_one(std::int64_t id, ValueSink& sink, std::size_t i) {
    const std::string key = config_.keys.value(id);
    if (locks_.mode() != LockMode::ReadWrite) return read_unlocked(id, key, sink, i);
    // A near hit needs no lock: it is a cached value, like a Redis hit, and taking the shared
    // lock would cost the round trip the near cache exists to save.
    if (config_.opts.near_cache && near_hit(key, sink, i, Clock::now())) return true;
    if (!health_.usable()) return load_degraded(id, sink, i);
    KeyLock lock(locks_, id, KeyLock::Side::Shared);
    if (auto loaded = lock_or_load(lock, id, sink, i)) return *loaded;
    bool found = read_unlocked(id, key, sink, i, /*looked_locally=*/config_.opts.near_cache != nullptr);
    lock.release();
    return found;
}

// ---- many ids: the same stages, with one round trip per stage for all of them ---------------

std::vector<bool> ReadPath::get(const std::vector<std::int64_t>& ids, ValueSink& sink) {
    std::vector<bool> found(ids.size(), false);
    if (ids.size() == 1) {  // get(id): no dedup map, the key made once
        found[0] = read_one(ids[0], sink, 0);
        return found;
    }
    // Distinct ids; a duplicate gets a copy of its first occurrence at the end.
    std::unordered_map<std::int64_t, std::size_t> first;
    std::vector<Item> items;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        if (first.emplace(ids[i], i).second) items.push_back({ids[i], config_.keys.value(ids[i]), i});
    }
    if (items.size() == 1 || locks_.mode() == LockMode::ReadWrite) {
        // Under ReadWrite every read holds its key's shared lock: one key at a time.
        for (const auto& item : items) found[item.i] = read_one(item.id, sink, item.i);
    } else {
        read_many(items, sink, found);
    }
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const std::size_t f = first[ids[i]];
        if (f == i) continue;
        found[i] = found[f];
        if (found[f]) sink.copy(f, i);
    }
    return found;
}

void ReadPath::read_many(const std::vector<Item>& items_in, ValueSink& sink, std::vector<bool>& found) {
    const auto t0 = Clock::now();
    // Near cache hits first; the rest are read from Redis (untracked: batch reads do not fill it).
    std::vector<Item> rest;
    if (config_.opts.near_cache) {
        for (const auto& item : items_in) {
            if (near_hit(item.key, sink, item.i, t0)) {
                found[item.i] = true;
            } else {
                rest.push_back(item);
            }
        }
        if (rest.empty()) return;
    }
    const std::vector<Item>& items = config_.opts.near_cache ? rest : items_in;
    if (!health_.usable()) return load_degraded(items, sink, found);
    std::vector<std::string> keys;
    for (const auto& item : items) keys.push_back(item.key);
    std::vector<std::optional<std::string>> entries;
    // With max_stale: which entries are stale (past their TTL).
    std::vector<bool> stale(items.size(), false);
    try {
        if (config_.opts.max_stale.count() > 0) {
            auto timed = config_.store->get_many_timed(keys);
            for (std::size_t k = 0; k < timed.size(); ++k) {
                if (timed[k]) {
                    stale[k] = is_stale(*timed[k]);
                    entries.push_back(std::move(timed[k]->entry));
                } else {
                    entries.emplace_back();
                }
            }
        } else {
            entries = config_.store->get_many(keys);
        }
    } catch (const Error& e) {
        stats_.lat.cache_error.record(Clock::now() - t0);
        health_.failed(e, "batch read");
        return load_degraded(items, sink, found);
    }
    std::vector<Item> missed;
    for (std::size_t k = 0; k < items.size(); ++k) {
        const Item& item = items[k];
        if (stale[k]) {
            // Refilled by this reader or served stale, one key at a time (stale keys are few).
            if (auto answered = revalidate(item.id, item.key, *entries[k], sink, item.i, t0)) {
                found[item.i] = *answered;
                continue;
            }
            entries[k].reset();  // did not decode: a miss
        }
        if (auto answered = answer(item.key, entries[k], sink, item.i, t0)) {
            found[item.i] = *answered;
        } else {
            missed.push_back(item);
        }
    }
    if (missed.empty()) return;
    resolve_misses(missed, sink, found);
    const auto resolved = Clock::now();
    for (std::size_t k = 0; k < missed.size(); ++k) stats_.lat.miss_load.record(resolved - t0);
}

void ReadPath::resolve_misses(const std::vector<Item>& missed, ValueSink& sink, std::vector<bool>& found) {
    if (locks_.mode() == LockMode::Mutex) {
        // Each miss under its own lock, re-checked (lock_mode.h).
        for (const auto& item : missed) found[item.i] = miss(item.id, item.key, sink, item.i);
        return;
    }
    if (!uses_marker()) return load_and_fill_many(missed, {}, sink, found);
    std::vector<std::string> keys, markers;
    for (const auto& item : missed) {
        keys.push_back(item.key);
        markers.push_back(CacheEntry::encode_marker(random_token()));
    }
    std::vector<Claim> claims;
    try {
        claims = config_.store->claim_many(keys, markers, config_.opts.marker_ttl);
    } catch (const Error& e) {
        health_.failed(e, "batch claim");
        return load_degraded(missed, sink, found);
    }
    std::vector<Item> claimed, waiting;
    std::vector<std::string> claimed_markers;
    for (std::size_t k = 0; k < missed.size(); ++k) {
        const Item& item = missed[k];
        switch (claims[k].result) {
            case Claim::Result::Claimed:
                claimed.push_back(item);
                claimed_markers.push_back(std::move(markers[k]));
                break;
            case Claim::Result::Busy: waiting.push_back(item); break;
            case Claim::Result::Present:
                switch (deliver(item.key, claims[k].entry, sink, item.i)) {
                    case Delivered::Value: found[item.i] = true; break;
                    case Delivered::NotFound: break;
                    case Delivered::Marker:
                    case Delivered::Corrupt: waiting.push_back(item); break;
                }
                break;
        }
    }
    load_and_fill_many(claimed, claimed_markers, sink, found);
    // Another reader is loading these: wait for its value as a single read does (C6).
    for (const auto& item : waiting) found[item.i] = fetch(item.id, item.key, sink, item.i);
}

void ReadPath::load_degraded(const std::vector<Item>& items, ValueSink& sink, std::vector<bool>& found) {
    bump(stats_.c.degraded_reads, items.size());
    const auto versions = load_many(items, sink);
    for (std::size_t k = 0; k < items.size(); ++k) found[items[k].i] = versions[k].has_value();
}

void ReadPath::load_and_fill_many(const std::vector<Item>& items, const std::vector<std::string>& markers,
                                  ValueSink& sink, std::vector<bool>& found) {
    if (items.empty()) return;
    std::vector<std::optional<std::int64_t>> versions;
    try {
        versions = load_many(items, sink);
    } catch (...) {
        // Let the waiters load for themselves now rather than after marker_ttl.
        for (std::size_t k = 0; k < markers.size(); ++k) give_back_marker(items[k].key, markers[k]);
        throw;
    }
    std::vector<Fill> fills;
    for (std::size_t k = 0; k < items.size(); ++k) {
        found[items[k].i] = versions[k].has_value();
        const std::string* marker = markers.empty() ? nullptr : &markers[k];
        if (auto f = make_fill(items[k].key, versions[k], sink, items[k].i, marker)) {
            fills.push_back(std::move(*f));
        } else if (marker) {
            give_back_marker(items[k].key, *marker);
        }
    }
    if (fills.empty()) return;
    const auto t0 = Clock::now();
    try {
        for (auto outcome : config_.store->fill_many(fills)) stats_.count_fill(outcome);
        stats_.lat.fill.record(Clock::now() - t0);
    } catch (const Error& e) {
        stats_.lat.cache_error.record(Clock::now() - t0);
        health_.failed(e, "batch backfill");
    }
}

std::vector<std::optional<std::int64_t>> ReadPath::load_many(const std::vector<Item>& items, ValueSink& sink) {
    std::vector<std::optional<std::int64_t>> versions(items.size());
    for (std::size_t start = 0; start < items.size(); start += kMaxInBatch) {
        const std::size_t n = std::min(kMaxInBatch, items.size() - start);
        const std::size_t padded = in_batch_size(n);
        SqlParams params;
        params.reserve(padded);
        std::unordered_map<std::int64_t, std::size_t> at;  // id -> index in items
        for (std::size_t j = 0; j < padded; ++j) {
            const std::size_t k = start + std::min(j, n - 1);  // pad by repeating the last id
            params.emplace_back(items[k].id);
            at[items[k].id] = k;
        }
        auto rows = pool_for(items, start, n).query(config_.sql.select_in(padded), params);
        bump(stats_.c.loads, n);
        fault::point(repo_points::after_db_read);
        for (const auto& row : rows) {
            auto it = at.find(row.get<std::int64_t>(config_.spec.key_column));
            if (it == at.end()) continue;
            const auto version = row.get<std::int64_t>(config_.spec.version_column);
            sink.from_db(items[it->second].i, version, row);
            versions[it->second] = version;
        }
    }
    return versions;
}

MysqlPool& ReadPath::pool_for(const std::vector<Item>& items, std::size_t start, std::size_t n) {
    if (!replica_.enabled()) return config_.db;
    std::vector<std::string> keys;
    for (std::size_t k = start; k < start + n; ++k) keys.push_back(items[k].key);
    return replica_.pool_for(keys);
}

}  // namespace lockstep::detail
