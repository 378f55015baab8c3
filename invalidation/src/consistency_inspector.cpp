#include "lockstep/invalidation/consistency_inspector.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "lockstep/cache/near_cache.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/cache/redis_near_cache.h"
#include "lockstep/core/error.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/core/logging.h"
#include "lockstep/core/mutex.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/invalidation/binlog_event.h"
#include "lockstep/invalidation/binlog_stream.h"
#include "lockstep/invalidation/fault_points.h"
#include "lockstep/invalidation/gtid_state.h"
#include "lockstep/strategies/cache_entry.h"

namespace lockstep {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kDurations = 65536;

// How an entity's content is read back: its comparison and the repository's SELECT.
struct ContentCheck {
    InspectedEntity entity;
    std::string select;  // SELECT key, version, columns FROM table WHERE key = ?
};

// One sampled change: the key, what the database committed, when it arrived.
struct Check {
    std::string key;
    std::int64_t id = 0;
    std::string table;  // "database.table": the per-table metrics
    const ContentCheck* content = nullptr;  // null: versions only
    const NearCache* near = nullptr;  // the near cache whose entry is judged; null: the Redis entry
    std::optional<std::int64_t> version;  // the committed version; nullopt: unknown (no column)
    bool deleted = false;
    Clock::time_point received;
    Clock::time_point due;
    bool stale_before = false;  // found stale at the first check: being re-read
};

enum class Verdict { Fresh, StaleByVersion, StaleByContent };

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

std::string quoted(const std::string& identifier, const char* part) {
    if (identifier.empty() || identifier.size() > 64) throw ConfigError(part, "must be 1 to 64 characters");
    for (char c : identifier) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$';
        if (!ok) throw ConfigError(part, "'" + identifier + "': only letters, digits, '_' and '$'");
    }
    return "`" + identifier + "`";
}

// The repository's own read of one row (strategies' EntitySql::select_one: the same list).
std::string select_of(const InspectedEntity& e) {
    const std::string key = quoted(e.key_column, "entity.key_column");
    std::string list = key + ", " + quoted(e.version_column, "entity.version_column");
    for (const auto& c : e.columns) list += ", " + quoted(c, "entity.columns");
    return "SELECT " + list + " FROM " + quoted(e.table, "entity.table") + " WHERE " + key + " = ?";
}

// Durations of resolved staleness, the last kDurations of them.
struct Durations {
    std::vector<double> ms;
    std::size_t next = 0;
    void add(double v) {
        if (ms.size() < kDurations) {
            ms.push_back(v);
        } else {
            ms[next++ % kDurations] = v;
        }
    }
};

}  // namespace

struct ConsistencyInspector::Impl {
    MysqlOptions mysql;
    RedisClient& redis;
    InvalidationMap map;
    InspectorOptions options;

    mutable Mutex mutex;
    CondVar wake;
    std::deque<Check> queue GUARDED_BY(mutex);  // ordered by due time: every check is delayed by the same amount
    // Re-read every recheck_every while stale; also the deferred first checks (defer()).
    std::vector<Check> stale_now GUARDED_BY(mutex);
    InspectorMetrics m GUARDED_BY(mutex);  // its `tables` stays empty: per_table holds those
    Durations durations GUARDED_BY(mutex);
    struct PerTable {
        InspectorTableMetrics m;
        Durations durations;
    };
    std::map<std::string, PerTable> per_table GUARDED_BY(mutex);
    InspectorTableMetrics near_m GUARDED_BY(mutex);  // the near caches' checks
    Durations near_durations GUARDED_BY(mutex);
    // The newest change received per key of a content-compared binding, while younger than
    // check_after (older ones are swept): what defers a check (header comment).
    std::unordered_map<std::string, Clock::time_point> last_change GUARDED_BY(mutex);
    std::size_t sweep_at GUARDED_BY(mutex) = 1024;

    // Set before start(), read-only after: the content comparison of each bound entity.
    std::vector<std::unique_ptr<ContentCheck>> contents;
    std::unordered_map<const TableBinding*, const ContentCheck*> content_of;
    // Set before start(), read-only after: the near caches watched per binding, kept alive here.
    std::vector<std::shared_ptr<const NearCache>> nears;
    std::unordered_map<const TableBinding*, std::vector<const NearCache*>> near_of;
    // Checker-thread state: the connection for content reads, opened on first use.
    std::unique_ptr<MysqlPool> db;

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

    // Applies `f` to the counters `c` counts in: the global ones and those of its table, or those
    // of the near caches.
    template <class F>
    void count(const Check& c, F&& f) REQUIRES(mutex) {
        if (c.near != nullptr) {
            f(near_m);
            return;
        }
        f(m);
        f(per_table[c.table].m);
    }

    // The checks of one changed row: its Redis entry's and, for a watched entity, its near
    // entries'. Sampled together.
    void schedule(std::vector<Check> group) EXCLUDES(mutex) {
        MutexLock lock(mutex);
        const auto now = Clock::now();
        for (const auto& c : group) count(c, [](auto& x) { ++x.rows_seen; });
        const Check& c = group.front();
        if (c.content != nullptr) {
            last_change[c.key] = now;
            if (last_change.size() >= sweep_at) {
                std::erase_if(last_change, [&](const auto& kv) { return now - kv.second > options.check_after; });
                sweep_at = std::max<std::size_t>(1024, 2 * last_change.size());
            }
        }
        if (options.sample_rate < 1.0 && std::uniform_real_distribution<double>(0, 1)(rng) >= options.sample_rate) return;
        ++m.sampled;
        for (auto& one : group) {
            one.received = now;
            one.due = now + options.check_after;
            queue.push_back(std::move(one));
        }
        wake.notify_all();
    }

    void on_rows(binlog::Bytes ev) EXCLUDES(mutex) {
        auto it = tables.find(binlog::rows_event_table_id(ev));
        if (it == tables.end() || !it->second.map) return;
        const Table& t = it->second;
        binlog::RowsEvent rows = binlog::decode_rows(ev, *t.map);
        const auto version_at = t.map->column_index(options.version_column);
        const std::string table = t.map->database + "." + t.map->table;
        for (const auto* b : t.bindings) {
            auto column = t.map->column_index(b->key_column);
            if (!column && t.map->primary_key.size() == 1) column = t.map->primary_key[0];
            if (!column) continue;
            auto found = content_of.find(b);
            const ContentCheck* content = found == content_of.end() ? nullptr : found->second;
            auto watched = near_of.find(b);
            for (const auto& change : rows.rows) {
                const bool deleted = change.after.empty();
                const binlog::RowImage& image = deleted ? change.before : change.after;
                if (*column >= image.size()) continue;
                auto id = image[*column].as_int64();
                if (!id) continue;
                std::optional<std::int64_t> version;
                if (!deleted && version_at && *version_at < image.size()) version = image[*version_at].as_int64();
                if (!deleted && !version && content == nullptr) continue;  // nothing to compare with
                Check c;
                c.key = map.key(*b, *id);
                c.id = *id;
                c.table = table;
                c.content = content;
                c.version = version;
                c.deleted = deleted;
                std::vector<Check> group;
                if (watched != near_of.end()) {
                    for (const NearCache* near : watched->second) {
                        group.push_back(c);
                        group.back().near = near;
                    }
                }
                group.insert(group.begin(), std::move(c));
                schedule(std::move(group));
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

    // Whether the cache disagrees with what the database committed. Throws on a failed read.
    Verdict verdict(const Check& c) EXCLUDES(mutex) {
        if (c.near != nullptr) return near_verdict(c);
        auto bytes = redis.command({"GET", c.key}).optional_string();
        if (!bytes) return Verdict::Fresh;
        auto entry = CacheEntry::decode(*bytes);
        if (!entry || entry->kind == CacheEntry::Kind::Marker) return Verdict::Fresh;
        if (c.deleted) return entry->kind == CacheEntry::Kind::Value ? Verdict::StaleByVersion : Verdict::Fresh;
        if (entry->kind == CacheEntry::Kind::NotFound) return Verdict::StaleByVersion;
        if (c.version && entry->version < *c.version) return Verdict::StaleByVersion;
        if (c.content == nullptr) return Verdict::Fresh;
        return content_verdict(c, entry->payload);
    }

    // The same rule for the local entry of a near cache, which only ever holds values.
    Verdict near_verdict(const Check& c) EXCLUDES(mutex) {
        const auto entry = c.near->peek(c.key);
        if (!entry) return Verdict::Fresh;
        if (c.deleted) return Verdict::StaleByVersion;
        if (c.version && entry->version < *c.version) return Verdict::StaleByVersion;
        if (c.content == nullptr) return Verdict::Fresh;
        return content_verdict(c, entry->bytes);
    }

    Verdict content_verdict(const Check& c, std::string_view payload) EXCLUDES(mutex) {
        // Same version (or newer, or none known): only the content can tell (inspected_entity.h
        // says what is compared). The row as it is now, through the repository's own read path.
        if (!db) {
            MysqlOptions o = mysql;
            o.pool_size = 1;
            db = std::make_unique<MysqlPool>(std::move(o));
        }
        auto row = db->query_one(c.content->select, {c.id});
        {
            MutexLock lock(mutex);
            ++m.content_reads;
        }
        if (!row) return Verdict::StaleByContent;  // a cached value of a row that is gone
        return c.content->entity.compare(payload, *row) == InspectedEntity::Content::Differs
                   ? Verdict::StaleByContent
                   : Verdict::Fresh;
    }

    void record_duration(const Check& c, Clock::time_point now) REQUIRES(mutex) {
        const double ms = std::chrono::duration<double, std::milli>(now - c.received).count();
        if (c.near != nullptr) {
            near_durations.add(ms);
            return;
        }
        durations.add(ms);
        per_table[c.table].durations.add(ms);
    }

    // A newer change of the key arrived less than check_after ago: its invalidation may still be
    // on its way. The check moves to that change's check time (and its staleness is timed from it).
    bool defer(Check& c, Clock::time_point now) REQUIRES(mutex) {
        auto it = last_change.find(c.key);
        if (it == last_change.end() || it->second <= c.received || it->second + options.check_after <= now) return false;
        ++m.deferred;
        c.received = it->second;
        c.due = it->second + options.check_after;
        stale_now.push_back(std::move(c));
        return true;
    }

    // One check (first or re-read) outside the lock; its outcome under it.
    void run_check(Check c) EXCLUDES(mutex) {
        Verdict v = Verdict::Fresh;
        try {
            if (!c.stale_before) fault::point(invalidation_points::before_inspector_check);
            v = verdict(c);
        } catch (const std::exception&) {  // Redis, the database, or the entity's from_row
            MutexLock lock(mutex);
            ++m.check_errors;
            if (c.stale_before) count(c, [](auto& x) { --x.stale_open; });
            return;
        }
        const bool stale = v != Verdict::Fresh;
        const auto now = Clock::now();
        MutexLock lock(mutex);
        if (!c.stale_before) {
            if (v == Verdict::StaleByContent && defer(c, now)) return;
            count(c, [](auto& x) { ++x.checked; });
            if (!stale) return;
            count(c, [&](auto& x) {
                ++x.stale;
                ++x.stale_open;
                if (v == Verdict::StaleByContent) ++x.stale_by_content;
            });
            c.stale_before = true;
        } else if (!stale) {
            count(c, [](auto& x) { --x.stale_open; });
            record_duration(c, now);
            return;
        } else if (now - c.received > options.track_for) {
            count(c, [](auto& x) {
                --x.stale_open;
                ++x.stale_given_up;
            });
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

void ConsistencyInspector::compare_content(InspectedEntity entity) {
    if (impl_->reader.joinable()) throw ConfigError("compare_content", "call it before start()");
    if (!entity.compare) throw ConfigError("compare_content", "no comparison (build it with inspected_entity())");
    auto check = std::make_unique<ContentCheck>();
    check->select = select_of(entity);
    bool bound = false;
    for (const auto& b : impl_->map.bindings()) {
        if (b.entity == entity.entity && b.prefix == entity.prefix) {
            impl_->content_of[&b] = check.get();
            bound = true;
        }
    }
    if (!bound) {
        throw ConfigError("compare_content", "no binding of entity '" + entity.entity + "' with prefix '" + entity.prefix + "'");
    }
    check->entity = std::move(entity);
    impl_->contents.push_back(std::move(check));
}

void ConsistencyInspector::watch_near_cache(const std::string& entity, const std::string& prefix,
                                            std::shared_ptr<const NearCache> near) {
    if (impl_->reader.joinable()) throw ConfigError("watch_near_cache", "call it before start()");
    if (!near) throw ConfigError("watch_near_cache", "no near cache");
    bool bound = false;
    for (const auto& b : impl_->map.bindings()) {
        if (b.entity == entity && b.prefix == prefix) {
            impl_->near_of[&b].push_back(near.get());
            bound = true;
        }
    }
    if (!bound) {
        throw ConfigError("watch_near_cache", "no binding of entity '" + entity + "' with prefix '" + prefix + "'");
    }
    impl_->nears.push_back(std::move(near));
}

void ConsistencyInspector::watch_near_cache(const std::string& entity, const std::string& prefix,
                                            std::shared_ptr<RedisNearCache> near) {
    if (!near) throw ConfigError("watch_near_cache", "no near cache");
    // Shares ownership of the whole RedisNearCache: its channel keeps feeding the local store.
    const NearCache* local = &near->local();
    watch_near_cache(entity, prefix, std::shared_ptr<const NearCache>(std::move(near), local));
}

InspectorMetrics ConsistencyInspector::metrics() const {
    MutexLock lock(impl_->mutex);
    InspectorMetrics out = impl_->m;
    auto per_million = [](std::uint64_t stale, std::uint64_t checked) {
        return checked == 0 ? 0 : 1e6 * static_cast<double>(stale) / static_cast<double>(checked);
    };
    out.stale_per_million = per_million(out.stale, out.checked);
    out.staleness_p50_ms = percentile(impl_->durations.ms, 0.50);
    out.staleness_p99_ms = percentile(impl_->durations.ms, 0.99);
    out.staleness_max_ms = percentile(impl_->durations.ms, 1.0);
    for (const auto& [table, t] : impl_->per_table) {
        InspectorTableMetrics tm = t.m;
        tm.stale_per_million = per_million(tm.stale, tm.checked);
        tm.staleness_p50_ms = percentile(t.durations.ms, 0.50);
        tm.staleness_p99_ms = percentile(t.durations.ms, 0.99);
        tm.staleness_max_ms = percentile(t.durations.ms, 1.0);
        out.tables[table] = tm;
    }
    out.near_cache = impl_->near_m;
    out.near_cache.stale_per_million = per_million(out.near_cache.stale, out.near_cache.checked);
    out.near_cache.staleness_p50_ms = percentile(impl_->near_durations.ms, 0.50);
    out.near_cache.staleness_p99_ms = percentile(impl_->near_durations.ms, 0.99);
    out.near_cache.staleness_max_ms = percentile(impl_->near_durations.ms, 1.0);
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
