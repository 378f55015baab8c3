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
            bump(stats_.c.degraded_reads);
            return load(id, sink, i).has_value();
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
                bump(stats_.c.degraded_reads);
                return load(id, sink, i).has_value();
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
        bump(stats_.c.degraded_reads);
        bool found = load(id, sink, i).has_value();
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

bool ReadPath::read_unlocked(std::int64_t id, const std::string& key, ValueSink& sink, std::size_t i) {
    if (!health_.usable()) {
        bump(stats_.c.degraded_reads);
        return load(id, sink, i).has_value();
    }
    const auto t0 = Clock::now();
    std::optional<std::string> entry;
    try {
        entry = config_.store->get(key);
    } catch (const Error& e) {
        stats_.lat.cache_error.record(Clock::now() - t0);
        health_.failed(e, "read of " + key);
        bump(stats_.c.degraded_reads);
        return load(id, sink, i).has_value();
    }
    if (entry) {
        switch (deliver(key, *entry, sink, i)) {
            case Delivered::Value:
                bump(stats_.c.hits);
                stats_.lat.hit.record(Clock::now() - t0);
                trace_(key, "hit");
                return true;
            case Delivered::NotFound:
                bump(stats_.c.negative_hits);
                stats_.lat.hit.record(Clock::now() - t0);
                trace_(key, "hit (not found)");
                return false;
            case Delivered::Marker: break;  // someone is loading: fetch() waits for it
            case Delivered::Corrupt: break;
        }
    }
    bump(stats_.c.misses);
    trace_(key, "miss");
    const bool found = miss(id, key, sink, i);
    stats_.lat.miss_load.record(Clock::now() - t0);
    return found;
}

bool ReadPath::read_one(std::int64_t id, ValueSink& sink, std::size_t i) {
    const std::string key = config_.keys.value(id);
    if (config_.opts.lock_mode != LockMode::ReadWrite) return read_unlocked(id, key, sink, i);
    if (!health_.usable()) {
        bump(stats_.c.degraded_reads);
        return load(id, sink, i).has_value();
    }
    KeyLock lock(locks_, id, KeyLock::Side::Shared);
    if (auto loaded = lock_or_load(lock, id, sink, i)) return *loaded;
    bool found = read_unlocked(id, key, sink, i);
    lock.release();
    return found;
}

std::vector<bool> ReadPath::get(const std::vector<std::int64_t>& ids, ValueSink& sink) {
    std::vector<bool> found(ids.size(), false);
    if (ids.empty()) return found;
    if (ids.size() == 1) {
        found[0] = read_one(ids[0], sink, 0);
        return found;
    }
    // Distinct ids; duplicates get a copy of the first occurrence at the end.
    std::unordered_map<std::int64_t, std::size_t> first;
    std::vector<std::size_t> unique;  // item indexes
    for (std::size_t i = 0; i < ids.size(); ++i) {
        if (first.emplace(ids[i], i).second) unique.push_back(i);
    }
    auto finish = [&] {
        for (std::size_t i = 0; i < ids.size(); ++i) {
            std::size_t f = first[ids[i]];
            if (f != i) {
                found[i] = found[f];
                if (found[f]) sink.copy(f, i);
            }
        }
        return found;
    };

    // Loads `items` from the database in batches (SELECT ... IN), delivering each; returns the
    // version per item (nullopt: no row).
    auto batch_keys = [&](const std::vector<std::size_t>& items, std::size_t start, std::size_t n) {
        std::vector<std::string> out;
        for (std::size_t j = start; j < start + n; ++j) out.push_back(config_.keys.value(ids[items[j]]));
        return out;
    };
    auto load_batch = [&](const std::vector<std::size_t>& items) {
        std::unordered_map<std::size_t, std::optional<std::int64_t>> versions;
        for (std::size_t start = 0; start < items.size(); start += kMaxInBatch) {
            const std::size_t n = std::min(kMaxInBatch, items.size() - start);
            const std::size_t padded = in_batch_size(n);
            SqlParams params;
            params.reserve(padded);
            std::unordered_map<std::int64_t, std::size_t> item_of;
            for (std::size_t j = 0; j < padded; ++j) {
                std::size_t item = items[start + std::min(j, n - 1)];  // pad by repeating the last id
                params.emplace_back(ids[item]);
                item_of[ids[item]] = item;
            }
            auto& from = replica_.enabled() ? replica_.pool_for(batch_keys(items, start, n)) : config_.db;
            auto rows = from.query(config_.sql.select_in(padded), params);
            bump(stats_.c.loads, n);
            fault::point(repo_points::after_db_read);
            for (std::size_t j = start; j < start + n; ++j) versions[items[j]] = std::nullopt;
            for (const auto& row : rows) {
                const auto id = row.get<std::int64_t>(config_.spec.key_column);
                auto it = item_of.find(id);
                if (it == item_of.end()) continue;
                const auto version = row.get<std::int64_t>(config_.spec.version_column);
                sink.from_db(it->second, version, row);
                versions[it->second] = version;
            }
        }
        return versions;
    };

    const bool per_key = config_.opts.lock_mode == LockMode::ReadWrite;
    if (per_key) {
        for (std::size_t i : unique) found[i] = read_one(ids[i], sink, i);
        return finish();
    }
    if (!health_.usable()) {
        bump(stats_.c.degraded_reads, unique.size());
        for (auto& [item, version] : load_batch(unique)) found[item] = version.has_value();
        return finish();
    }

    std::vector<std::string> keys_of(ids.size());
    std::vector<std::string> unique_keys;
    for (std::size_t i : unique) {
        keys_of[i] = config_.keys.value(ids[i]);
        unique_keys.push_back(keys_of[i]);
    }
    std::vector<std::optional<std::string>> entries;
    try {
        entries = config_.store->get_many(unique_keys);
    } catch (const Error& e) {
        health_.failed(e, "batch read");
        bump(stats_.c.degraded_reads, unique.size());
        for (auto& [item, version] : load_batch(unique)) found[item] = version.has_value();
        return finish();
    }

    std::vector<std::size_t> missed;   // load them
    std::vector<std::size_t> one_by_one;  // another loader holds them, or undecodable twice
    for (std::size_t u = 0; u < unique.size(); ++u) {
        const std::size_t i = unique[u];
        if (!entries[u]) {
            bump(stats_.c.misses);
            missed.push_back(i);
            continue;
        }
        switch (deliver(keys_of[i], *entries[u], sink, i)) {
            case Delivered::Value: bump(stats_.c.hits); found[i] = true; break;
            case Delivered::NotFound: bump(stats_.c.negative_hits); break;
            case Delivered::Marker: bump(stats_.c.misses); one_by_one.push_back(i); break;
            case Delivered::Corrupt: bump(stats_.c.misses); missed.push_back(i); break;
        }
    }

    if (config_.opts.lock_mode == LockMode::Mutex) {
        // Each miss under its own lock, re-checked (lock_mode.h).
        for (std::size_t i : missed) found[i] = miss(ids[i], keys_of[i], sink, i);
        for (std::size_t i : one_by_one) found[i] = miss(ids[i], keys_of[i], sink, i);
        return finish();
    }

    std::vector<std::size_t> to_load;
    std::unordered_map<std::size_t, std::string> markers;
    if (!missed.empty() && uses_marker()) {
        std::vector<std::string> claim_keys, claim_markers;
        for (std::size_t i : missed) {
            claim_keys.push_back(keys_of[i]);
            claim_markers.push_back(CacheEntry::encode_marker(random_token()));
        }
        std::vector<Claim> claims;
        try {
            claims = config_.store->claim_many(claim_keys, claim_markers, config_.opts.marker_ttl);
        } catch (const Error& e) {
            health_.failed(e, "batch claim");
            bump(stats_.c.degraded_reads, missed.size());
            for (auto& [item, version] : load_batch(missed)) found[item] = version.has_value();
            for (std::size_t i : one_by_one) found[i] = fetch(ids[i], keys_of[i], sink, i);
            return finish();
        }
        for (std::size_t m = 0; m < missed.size(); ++m) {
            const std::size_t i = missed[m];
            switch (claims[m].result) {
                case Claim::Result::Claimed:
                    to_load.push_back(i);
                    markers[i] = claim_markers[m];
                    break;
                case Claim::Result::Busy: one_by_one.push_back(i); break;
                case Claim::Result::Present:
                    switch (deliver(keys_of[i], claims[m].entry, sink, i)) {
                        case Delivered::Value: found[i] = true; break;
                        case Delivered::NotFound: break;
                        case Delivered::Marker:
                        case Delivered::Corrupt: one_by_one.push_back(i); break;
                    }
                    break;
            }
        }
    } else {
        to_load = missed;
    }

    if (!to_load.empty()) {
        std::unordered_map<std::size_t, std::optional<std::int64_t>> versions;
        try {
            versions = load_batch(to_load);
        } catch (...) {
            for (auto& [item, marker] : markers) give_back_marker(keys_of[item], marker);
            throw;
        }
        std::vector<Fill> fills;
        for (std::size_t i : to_load) {
            found[i] = versions[i].has_value();
            auto mk = markers.find(i);
            auto f = make_fill(keys_of[i], versions[i], sink, i, mk == markers.end() ? nullptr : &mk->second);
            if (f) {
                fills.push_back(std::move(*f));
            } else if (mk != markers.end()) {
                give_back_marker(keys_of[i], mk->second);
            }
        }
        if (!fills.empty()) {
            const auto t0 = Clock::now();
            try {
                for (auto outcome : config_.store->fill_many(fills)) stats_.count_fill(outcome);
                stats_.lat.fill.record(Clock::now() - t0);
            } catch (const Error& e) {
                stats_.lat.cache_error.record(Clock::now() - t0);
                health_.failed(e, "batch backfill");
            }
        }
    }
    for (std::size_t i : one_by_one) found[i] = fetch(ids[i], keys_of[i], sink, i);
    return finish();
}

}  // namespace lockstep::detail
