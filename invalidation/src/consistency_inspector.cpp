#include "lockstep/invalidation/consistency_inspector.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <optional>
#include <random>
#include <thread>
#include <unordered_map>
#include <vector>

#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"
#include "lockstep/core/mutex.h"
#include "lockstep/invalidation/binlog_event.h"
#include "lockstep/invalidation/binlog_stream.h"
#include "lockstep/invalidation/gtid_state.h"
#include "lockstep/strategies/cache_entry.h"

namespace lockstep {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kDurations = 65536;

// One sampled change: the key, what the database committed, when it arrived.
struct Check {
    std::string key;
    std::optional<std::int64_t> version;  // the committed version; nullopt: unknown (no column)
    bool deleted = false;
    Clock::time_point received;
    Clock::time_point due;
    bool stale_before = false;  // found stale at the first check: being re-read
};

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

struct ConsistencyInspector::Impl {
    MysqlOptions mysql;
    RedisClient& redis;
    InvalidationMap map;
    InspectorOptions options;

    mutable Mutex mutex;
    CondVar wake;
    std::deque<Check> queue GUARDED_BY(mutex);  // ordered by due time: every check is delayed by the same amount
    std::vector<Check> stale_now GUARDED_BY(mutex);  // re-read every recheck_every
    InspectorMetrics m GUARDED_BY(mutex);
    std::vector<double> durations GUARDED_BY(mutex);
    std::size_t next_duration GUARDED_BY(mutex) = 0;

    std::atomic<bool> stopping{false};
    std::thread reader, checker;
    std::mt19937_64 rng GUARDED_BY(mutex){std::random_device{}()};

    // Reader-thread state.
    struct Table {
        std::vector<const TableBinding*> bindings;
        std::optional<binlog::TableMap> map;
    };
    std::unordered_map<std::uint64_t, Table> tables;
    GtidState seen;

    Impl(MysqlOptions my, RedisClient& r, InvalidationMap mp, InspectorOptions o)
        : mysql(std::move(my)), redis(r), map(std::move(mp)), options(std::move(o)) {}

    void schedule(std::string key, std::optional<std::int64_t> version, bool deleted) EXCLUDES(mutex) {
        MutexLock lock(mutex);
        ++m.rows_seen;
        if (options.sample_rate < 1.0 && std::uniform_real_distribution<double>(0, 1)(rng) >= options.sample_rate) return;
        ++m.sampled;
        const auto now = Clock::now();
        queue.push_back({std::move(key), version, deleted, now, now + options.check_after, false});
        wake.notify_all();
    }

    void on_rows(binlog::Bytes ev) EXCLUDES(mutex) {
        auto it = tables.find(binlog::rows_event_table_id(ev));
        if (it == tables.end() || !it->second.map) return;
        const Table& t = it->second;
        binlog::RowsEvent rows = binlog::decode_rows(ev, *t.map);
        const auto version_at = t.map->column_index(options.version_column);
        for (const auto* b : t.bindings) {
            auto column = t.map->column_index(b->key_column);
            if (!column && t.map->primary_key.size() == 1) column = t.map->primary_key[0];
            if (!column) continue;
            for (const auto& change : rows.rows) {
                const bool deleted = change.after.empty();
                const binlog::RowImage& image = deleted ? change.before : change.after;
                if (*column >= image.size()) continue;
                auto id = image[*column].as_int64();
                if (!id) continue;
                std::optional<std::int64_t> version;
                if (!deleted && version_at && *version_at < image.size()) version = image[*version_at].as_int64();
                if (!deleted && !version) continue;  // nothing to compare with
                schedule(map.key(*b, *id), version, deleted);
            }
        }
    }

    void read_event(const std::vector<std::uint8_t>& bytes) EXCLUDES(mutex) {
        binlog::Bytes ev(bytes);
        const binlog::EventHeader h = binlog::decode_header(ev);
        if (h.type == binlog::EventType::Gtid) {
            seen.update(binlog::decode_gtid(ev));
        } else if (h.type == binlog::EventType::TableMap) {
            binlog::TableName name = binlog::decode_table_name(ev);
            Table t;
            t.bindings = map.bindings_for(name.database, name.table);
            if (!t.bindings.empty()) {
                try {
                    t.map = binlog::decode_table_map(ev);
                } catch (const Error&) {
                    // A table the decoder refuses: not inspected (the follower flushes it).
                }
            }
            tables[name.table_id] = std::move(t);
        } else if (binlog::is_rows_event(h.type)) {
            on_rows(ev);
        }
    }

    void read_loop() EXCLUDES(mutex) {
        bool fresh = true;
        auto backoff = std::chrono::milliseconds(20);
        while (!stopping.load()) {
            try {
                if (fresh) seen = GtidState::parse(BinlogStream::current_gtid(mysql));
                fresh = false;
                BinlogStream stream({.mysql = mysql,
                                     .server_id = options.server_id,
                                     .start_gtid = seen.to_string(),
                                     .heartbeat = options.heartbeat,
                                     .read_timeout = options.read_timeout});
                stream.open();
                tables.clear();
                {
                    MutexLock lock(mutex);
                    m.connected = true;
                }
                wake.notify_all();
                backoff = std::chrono::milliseconds(20);
                while (!stopping.load()) read_event(stream.next().bytes);
            } catch (const BinlogPositionLostError&) {
                fresh = true;  // a sampler: restart from now
            } catch (const std::exception& e) {
                logger()->warn("consistency inspector: {}", e.what());
            }
            {
                MutexLock lock(mutex);
                if (m.connected) ++m.reconnects;
                m.connected = false;
            }
            if (stopping.load()) return;
            std::this_thread::sleep_for(backoff);
            backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
        }
    }

    // Whether the cache disagrees with what `c` says the database committed. Throws on a failed read.
    bool is_stale(const Check& c) {
        auto bytes = redis.command({"GET", c.key}).optional_string();
        if (!bytes) return false;
        auto entry = CacheEntry::decode(*bytes);
        if (!entry || entry->kind == CacheEntry::Kind::Marker) return false;
        if (c.deleted) return entry->kind == CacheEntry::Kind::Value;
        if (entry->kind == CacheEntry::Kind::NotFound) return true;
        return entry->version < *c.version;
    }

    void record_duration(const Check& c, Clock::time_point now) REQUIRES(mutex) {
        const double ms = std::chrono::duration<double, std::milli>(now - c.received).count();
        if (durations.size() < kDurations) {
            durations.push_back(ms);
        } else {
            durations[next_duration++ % kDurations] = ms;
        }
    }

    // One check (first or re-read) outside the lock; its outcome under it.
    void run_check(Check c) EXCLUDES(mutex) {
        bool stale = false;
        try {
            stale = is_stale(c);
        } catch (const Error&) {
            MutexLock lock(mutex);
            ++m.check_errors;
            if (c.stale_before) --m.stale_open;
            return;
        }
        const auto now = Clock::now();
        MutexLock lock(mutex);
        if (!c.stale_before) {
            ++m.checked;
            if (!stale) return;
            ++m.stale;
            ++m.stale_open;
            c.stale_before = true;
        } else if (!stale) {
            --m.stale_open;
            record_duration(c, now);
            return;
        } else if (now - c.received > options.track_for) {
            --m.stale_open;
            ++m.stale_given_up;
            return;
        }
        c.due = now + options.recheck_every;
        stale_now.push_back(std::move(c));
    }

    void check_loop() EXCLUDES(mutex) {
        MutexLock lock(mutex);
        while (!stopping.load()) {
            const auto now = Clock::now();
            std::vector<Check> due;
            while (!queue.empty() && queue.front().due <= now) {
                due.push_back(std::move(queue.front()));
                queue.pop_front();
            }
            for (auto it = stale_now.begin(); it != stale_now.end();) {
                if (it->due <= now) {
                    due.push_back(std::move(*it));
                    it = stale_now.erase(it);
                } else {
                    ++it;
                }
            }
            if (!due.empty()) {
                lock.unlock();
                for (auto& c : due) run_check(std::move(c));
                lock.lock();
                continue;
            }
            auto next = now + options.recheck_every;
            if (!queue.empty()) next = std::min(next, queue.front().due);
            for (const auto& c : stale_now) next = std::min(next, c.due);
            wake.wait_until(mutex, next);
        }
    }
};

ConsistencyInspector::ConsistencyInspector(MysqlOptions mysql, RedisClient& redis, InvalidationMap map,
                                           InspectorOptions options) {
    if (!(options.sample_rate > 0 && options.sample_rate <= 1)) {
        throw ConfigError("sample_rate", "must be in (0, 1], got " + std::to_string(options.sample_rate));
    }
    if (options.check_after.count() <= 0) throw ConfigError("check_after", "must be positive");
    if (options.recheck_every.count() <= 0) throw ConfigError("recheck_every", "must be positive");
    impl_ = std::make_unique<Impl>(std::move(mysql), redis, std::move(map), std::move(options));
}

ConsistencyInspector::~ConsistencyInspector() { stop(); }

void ConsistencyInspector::start() {
    if (impl_->reader.joinable()) return;
    impl_->stopping = false;
    impl_->reader = std::thread([this] { impl_->read_loop(); });
    impl_->checker = std::thread([this] { impl_->check_loop(); });
}

void ConsistencyInspector::stop() {
    impl_->stopping = true;
    {
        // Between check_loop's test of `stopping` and its wait (both under the mutex): taking it
        // here means the notify below cannot fall in that gap and be missed.
        MutexLock lock(impl_->mutex);
    }
    impl_->wake.notify_all();
    if (impl_->reader.joinable()) impl_->reader.join();
    if (impl_->checker.joinable()) impl_->checker.join();
}

InspectorMetrics ConsistencyInspector::metrics() const {
    MutexLock lock(impl_->mutex);
    InspectorMetrics out = impl_->m;
    out.stale_per_million = out.checked == 0 ? 0 : 1e6 * static_cast<double>(out.stale) / static_cast<double>(out.checked);
    out.staleness_p50_ms = percentile(impl_->durations, 0.50);
    out.staleness_p99_ms = percentile(impl_->durations, 0.99);
    out.staleness_max_ms = percentile(impl_->durations, 1.0);
    return out;
}

bool ConsistencyInspector::wait_connected(std::chrono::milliseconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    MutexLock lock(impl_->mutex);
    while (!impl_->m.connected) {
        if (impl_->wake.wait_until(impl_->mutex, until) == std::cv_status::timeout) break;
    }
    return impl_->m.connected;
}

}  // namespace lockstep
