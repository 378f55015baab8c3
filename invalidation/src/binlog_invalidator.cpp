// The follower loop: stream -> transaction groups -> deletes -> applied position -> saved
// position. The stages and their invariant:
//   read_event   one event into the current group (keys and entities to flush)
//   finish_group the finished group joins the buffer (`ready`)
//   flush_ready  when the stream has nothing more already received (or a batch bound is hit):
//                the DELs of every buffered group in ONE pipeline, in stream order; the groups
//                whose DELs (and every earlier group's) were acknowledged are applied, in order,
//                and queued for their second DEL; from the first group not acknowledged (an
//                error reply, a broken connection) the rest is retried until it lands
//   redelete     (its own thread) `second_delete_delay` later, the due groups' keys are deleted
//                again in one pipeline, THEN their GTIDs are settled
//   save         the settled position, at most every save_interval: a saved position never runs
//                ahead of the deletes, first or second (at-least-once for both).
// The second DEL closes the visibility window (docs/invalidation.md): MariaDB sends a group to
// the dump thread just before its commit is visible, so a reader may cache the old row after the
// first DEL.
#include "lockstep/invalidation/binlog_invalidator.h"

#include <algorithm>
#include <cctype>
#include <deque>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>

#include "lockstep/cache/redis_client.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/core/logging.h"
#include "lockstep/core/mutex.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/invalidation/binlog_event.h"
#include "lockstep/invalidation/binlog_stream.h"
#include "lockstep/invalidation/fault_points.h"
#include "lockstep/invalidation/gtid_state.h"
#include "lockstep/invalidation/position_store.h"
#include "key_scan.h"

namespace lockstep {

namespace {

using Clock = std::chrono::steady_clock;

std::string upper_prefix(const std::string& s, std::size_t n) {
    std::string out;
    for (char c : s) {
        if (out.empty() && std::isspace(static_cast<unsigned char>(c))) continue;
        if (out.size() == n) break;
        out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    return out;
}

bool contains_word_ci(const std::string& text, const std::string& word) {
    auto lower = [](std::string s) {
        for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return s;
    };
    std::string t = lower(text), w = lower(word);
    auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$'; };
    for (std::size_t at = t.find(w); at != std::string::npos; at = t.find(w, at + 1)) {
        bool left = at == 0 || !ident(t[at - 1]);
        bool right = at + w.size() >= t.size() || !ident(t[at + w.size()]);
        if (left && right) return true;
    }
    return false;
}

// A fixed window of recent lag samples, for percentiles.
class LagWindow {
public:
    void add(double us) {
        if (samples_.size() < kSize) {
            samples_.push_back(us);
        } else {
            samples_[next_] = us;
            next_ = (next_ + 1) % kSize;
        }
    }
    void fill(InvalidatorMetrics& m) const {
        if (samples_.empty()) return;
        std::vector<double> s = samples_;
        std::sort(s.begin(), s.end());
        auto at = [&](double q) { return s[std::min(s.size() - 1, static_cast<std::size_t>(q * static_cast<double>(s.size())))]; };
        m.lag_p50_us = at(0.50);
        m.lag_p99_us = at(0.99);
        m.lag_max_us = s.back();
    }

private:
    static constexpr std::size_t kSize = 65536;
    std::vector<double> samples_;
    std::size_t next_ = 0;
};

// One transaction's worth of work.
struct Group {
    bool open = false;
    bool standalone = false;
    binlog::Gtid gtid;
    std::uint32_t timestamp = 0;
    Clock::time_point first_event;
    std::set<std::string> keys;
    std::set<const TableBinding*> flush;
};

// A group whose first DEL landed, waiting for its second.
struct Pending {
    Clock::time_point due;
    binlog::Gtid gtid;
    std::set<std::string> keys;
    std::set<const TableBinding*> flush;
};

// What the follower knows about a table id in the current stream.
struct TableState {
    std::optional<binlog::TableMap> map;          // watched and decodable
    std::vector<const TableBinding*> bindings;    // empty: not watched
};

}  // namespace

struct BinlogInvalidator::Impl {
    MysqlOptions mysql;
    RedisClient& redis;
    InvalidationMap map;
    BinlogInvalidatorOptions options;
    // On the current source; its own pool: it leaves sql_log_bin = 0 on its connections.
    std::unique_ptr<PositionStore> positions;
    // [the configured server, failover_sources...]; `mysql` is sources[current].
    std::vector<MysqlOptions> sources;
    std::size_t current = 0;
    // Follower thread: when the last event arrived, and (after a switch) the last event of the
    // previous source, until the new one's first.
    Clock::time_point last_event_at{};
    std::optional<Clock::time_point> switched_after;
    // With failover sources: a connection to the current source, to see it turn read-only.
    std::unique_ptr<MysqlPool> source_probe;
    Clock::time_point last_source_check{};

    std::atomic<bool> stopping{false};
    std::thread thread;

    // Follower-thread state.
    std::unordered_map<std::uint64_t, TableState> tables;
    Group group;
    // Finished groups whose first DELs have not been sent yet, in stream order (flush_ready).
    std::vector<Group> ready;
    std::size_t ready_keys = 0;
    Clock::time_point last_save{};
    // The settled position moved since the last save (set by both threads).
    std::atomic<bool> dirty{false};

    // The re-delete thread (second DELs); runs while run() does, when second_delete_delay > 0.
    std::thread redeleter;

    // Shared between the follower thread and metrics() / wait_caught_up() callers.
    mutable Mutex mutex;
    CondVar applied_changed;
    InvalidatorMetrics m GUARDED_BY(mutex);
    LagWindow lag GUARDED_BY(mutex);
    GtidState applied GUARDED_BY(mutex);
    // What is saved: applied, minus the groups whose second DEL has not landed yet.
    GtidState settled GUARDED_BY(mutex);
    std::deque<Pending> pending GUARDED_BY(mutex);
    CondVar pending_changed;
    bool redeleter_stop GUARDED_BY(mutex) = false;
    // Bumped when the position is reset (start, lost position): a batch taken before must not
    // settle its older GTIDs over the new position.
    std::uint64_t generation GUARDED_BY(mutex) = 0;
    std::uint32_t last_timestamp GUARDED_BY(mutex) = 0;
    // sources[current], for wait_caught_up() callers.
    MysqlOptions source_now GUARDED_BY(mutex);

    Impl(MysqlOptions mysql_in, RedisClient& redis_in, InvalidationMap map_in, BinlogInvalidatorOptions options_in)
        : mysql(std::move(mysql_in)),
          redis(redis_in),
          map(std::move(map_in)),
          options(std::move(options_in)),
          positions(std::make_unique<PositionStore>(pool_options(mysql, options.read_timeout))) {
        sources.push_back(mysql);
        for (const auto& o : options.failover_sources) sources.push_back(o);
        MutexLock lock(mutex);
        source_now = mysql;
        m.source = address(mysql);
    }

    static std::string address(const MysqlOptions& o) { return o.host + ":" + std::to_string(o.port); }

    // The position store's pool must not block the follower longer than the stream would: a paused
    // server is noticed by the read timeout here too.
    static MysqlOptions pool_options(MysqlOptions o, std::chrono::milliseconds read_timeout) {
        o.pool_size = 2;
        o.read_timeout = std::max(read_timeout, std::chrono::milliseconds(1000));
        o.write_timeout = o.read_timeout;
        return o;
    }

    void report(std::exception_ptr e) {
        if (options.on_error) options.on_error(e);
    }
    template <class F>
    void count(F&& f) EXCLUDES(mutex) {
        MutexLock lock(mutex);
        f(m);
    }

    // Sleeps `d` unless stop() is called meanwhile. False when stopping.
    bool pause(std::chrono::milliseconds d) {
        auto until = Clock::now() + d;
        while (!stopping.load() && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        return !stopping.load();
    }

    // ---- Redis side -------------------------------------------------------------------------

    void delete_keys(const std::vector<std::string>& keys) {
        for (std::size_t at = 0; at < keys.size(); at += 512) {
            std::vector<std::vector<std::string>> commands;
            for (std::size_t i = at; i < std::min(keys.size(), at + 512); ++i) commands.push_back({"DEL", keys[i]});
            for (const auto& reply : redis.pipeline(commands)) reply.throw_if_error();
        }
    }

    // Every value key of one entity, on every master (key_scan.h: SCAN walks one node only).
    std::uint64_t flush_binding(const TableBinding& b) {
        std::uint64_t n = 0;
        scan_every_master(redis, map.scan_pattern(b), [&](const std::vector<std::string>& keys) {
            delete_keys(keys);
            n += keys.size();
        });
        return n;
    }

    // Retries until the deletes land or stop() is called (once stopping: one attempt). True when
    // they landed. `second`: the delayed second DEL (counted apart).
    bool apply(const std::set<std::string>& keys, const std::set<const TableBinding*>& flush, bool second = false) {
        std::vector<std::string> list(keys.begin(), keys.end());
        auto backoff = options.retry_min;
        for (;;) {
            try {
                std::uint64_t flushed = 0;
                for (const TableBinding* b : flush) flushed += flush_binding(*b);
                delete_keys(list);
                count([&](InvalidatorMetrics& mm) {
                    (second ? mm.second_keys_deleted : mm.keys_deleted) += list.size();
                    if (second) ++mm.second_batches;
                    mm.flushes += flush.size();
                    mm.flushed_keys += flushed;
                });
                return true;
            } catch (const Error&) {
                count([](InvalidatorMetrics& mm) { ++mm.redis_errors; });
                report(std::current_exception());
                if (!pause(backoff)) return false;
                backoff = std::min(options.retry_max, backoff * 2);
            }
        }
    }

    void flush_all() {
        std::set<const TableBinding*> all;
        for (const auto& b : map.bindings()) all.insert(&b);
        apply({}, all);
    }

    // ---- position ---------------------------------------------------------------------------

    void save_position(bool force) EXCLUDES(mutex) {
        if (!dirty.load() || (!force && Clock::now() - last_save < options.save_interval)) return;
        dirty = false;  // before the read: a settle after it sets it again
        std::string gtid;
        {
            MutexLock lock(mutex);
            gtid = settled.to_string();
        }
        try {
            positions->save(options.name, gtid, options.fence_token);
            last_save = Clock::now();
            count([&](InvalidatorMetrics& mm) {
                ++mm.positions_saved;
                mm.saved_gtid = gtid;
            });
        } catch (const ConflictError&) {
            fenced_out();
        } catch (const Error&) {
            dirty = true;
            report(std::current_exception());  // retried at the next group or heartbeat
        }
    }

    // A newer epoch wrote the position: this instance was deposed (paused past its lease, cut
    // off). It stops at once; what it applied but did not save is replayed by the new leader.
    void fenced_out() EXCLUDES(mutex) {
        logger()->warn("follower {}: position write refused, a newer leader (epoch > {}) owns it; stopping",
                       options.name, options.fence_token);
        report(std::current_exception());
        count([](InvalidatorMetrics& mm) {
            ++mm.positions_refused;
            mm.fenced_out = true;
        });
        stopping = true;
    }

    bool is_fenced_out() EXCLUDES(mutex) {
        MutexLock lock(mutex);
        return m.fenced_out;
    }

    void set_applied(const GtidState& state) EXCLUDES(mutex) {
        {
            MutexLock lock(mutex);
            applied = state;
            settled = state;
            pending.clear();
            ++generation;
            m.applied_gtid = applied.to_string();
        }
        dirty = true;
        applied_changed.notify_all();
    }

    // ---- the stream -------------------------------------------------------------------------

    // The group's deletes are sent with the buffer's (flush_ready, from follow_once's loop).
    void finish_group() {
        if (!group.open) return;
        ready_keys += group.keys.size();
        ready.push_back(std::move(group));
        group = Group{};
    }

    bool flush_due(const BinlogStream& stream) const {
        if (ready.empty()) return false;
        return ready.size() >= options.batch_max_transactions || ready_keys >= options.batch_max_keys ||
               !stream.has_buffered_event() || Clock::now() - ready.front().first_event >= options.batch_max_wait;
    }

    // Sends the first DELs of ready[from..]: the entity flushes they need (SCAN + DEL, rare), then
    // one DEL per key in one pipeline (split only past kPipelineMax commands). Returns the end of
    // the acknowledged prefix: every group before it had every DEL answered without error, and so
    // had every group before that. An error is counted and reported; the groups from the returned
    // index on are not applied (at-least-once: they are sent again).
    std::size_t send_batch(std::size_t from) EXCLUDES(mutex) {
        static constexpr std::size_t kPipelineMax = 8192;
        std::vector<std::vector<std::string>> commands;
        std::vector<std::size_t> ends;  // ends[i - from]: one past group i's last command
        std::set<const TableBinding*> flush;
        for (std::size_t i = from; i < ready.size(); ++i) {
            for (const auto& key : ready[i].keys) commands.push_back({"DEL", key});
            ends.push_back(commands.size());
            flush.insert(ready[i].flush.begin(), ready[i].flush.end());
        }
        std::exception_ptr error;
        std::uint64_t flushed = 0, pipelines = 0;
        bool flushes_done = false;
        std::size_t good = 0;  // commands acknowledged, counted from the first
        try {
            for (const TableBinding* b : flush) flushed += flush_binding(*b);
            flushes_done = true;
            for (std::size_t at = 0; at < commands.size() && !error; at += kPipelineMax) {
                const auto first = commands.begin() + static_cast<std::ptrdiff_t>(at);
                const auto last = commands.begin() + static_cast<std::ptrdiff_t>(std::min(commands.size(), at + kPipelineMax));
                ++pipelines;
                for (const auto& reply : redis.pipeline(std::vector<std::vector<std::string>>(first, last))) {
                    try {
                        reply.throw_if_error();
                    } catch (const Error&) {
                        error = std::current_exception();  // answered in order: the prefix stands
                        break;
                    }
                    ++good;
                }
            }
            if (!error && good != commands.size()) {
                throw ProtocolError("follower: " + std::to_string(good) + " of " + std::to_string(commands.size()) +
                                    " DELs answered");
            }
        } catch (const Error&) {
            error = std::current_exception();  // nothing past `good` is known to have landed
        }
        std::size_t acked = from;
        if (flushes_done) {
            while (acked < ready.size() && ends[acked - from] <= good) ++acked;
        }
        const std::uint64_t keys = acked == from ? 0 : ends[acked - from - 1];
        count([&](InvalidatorMetrics& mm) {
            mm.delete_pipelines += pipelines;
            mm.keys_deleted += keys;
            if (acked > from) ++mm.delete_batches;
            if (flushes_done) {
                mm.flushes += flush.size();
                mm.flushed_keys += flushed;
            }
            if (error) ++mm.redis_errors;
        });
        if (error) report(error);
        return acked;
    }

    // Applies ready[from, to): their first DELs landed, in order. Each is queued for its second
    // DEL (or settled at once without one).
    void applied_groups(std::size_t from, std::size_t to) EXCLUDES(mutex) {
        if (from == to) return;
        auto now = Clock::now();
        bool queued = false;
        {
            MutexLock lock(mutex);
            for (std::size_t i = from; i < to; ++i) {
                Group& g = ready[i];
                applied.update(g.gtid);
                ++m.transactions;
                lag.add(std::chrono::duration<double, std::micro>(now - g.first_event).count());
                last_timestamp = g.timestamp;
                bool nothing = g.keys.empty() && g.flush.empty();
                if (options.second_delete_delay.count() <= 0 || (nothing && pending.empty())) {
                    settled.update(g.gtid);
                    dirty = true;
                } else {
                    // Queued even with no keys while others wait: the settled position moves in order.
                    pending.push_back({now + options.second_delete_delay, g.gtid, std::move(g.keys), std::move(g.flush)});
                    queued = queued || pending.size() == 1;
                }
            }
            m.applied_gtid = applied.to_string();
        }
        if (queued) pending_changed.notify_all();
        applied_changed.notify_all();
    }

    // Sends the buffer's first DELs, retrying from the first group not acknowledged until every
    // group landed or stop() is called (once stopping: one attempt; the rest is replayed from the
    // saved position after the restart).
    void flush_ready() EXCLUDES(mutex) {
        std::size_t done = 0;
        auto backoff = options.retry_min;
        while (done < ready.size()) {
            std::size_t acked = send_batch(done);
            applied_groups(done, acked);
            done = acked;
            if (done == ready.size()) break;
            save_position(false);  // what did land (and was settled) is saved while Redis refuses the rest
            if (!pause(backoff)) break;
            backoff = std::min(options.retry_max, backoff * 2);
        }
        ready.clear();
        ready_keys = 0;
        save_position(false);
    }

    void on_table_map(binlog::Bytes ev) {
        binlog::TableName name = binlog::decode_table_name(ev);
        TableState state;
        state.bindings = map.bindings_for(name.database, name.table);
        if (!state.bindings.empty()) {
            try {
                state.map = binlog::decode_table_map(ev);
            } catch (const UnsupportedColumnError&) {
                // A watched table the decoder cannot read: its changes are flushed, never missed.
                report(std::current_exception());
            }
        }
        tables[name.table_id] = std::move(state);
    }

    void on_rows(binlog::Bytes ev) {
        auto it = tables.find(binlog::rows_event_table_id(ev));
        if (it == tables.end() || it->second.bindings.empty()) return;
        const TableState& t = it->second;
        if (!t.map) {
            for (const auto* b : t.bindings) group.flush.insert(b);
            return;
        }
        binlog::RowsEvent rows = binlog::decode_rows(ev, *t.map);
        count([&](InvalidatorMetrics& mm) { mm.rows += rows.rows.size(); });
        for (const auto* b : t.bindings) {
            auto column = t.map->column_index(b->key_column);
            if (!column && t.map->primary_key.size() == 1) column = t.map->primary_key[0];
            for (const auto& change : rows.rows) {
                for (const binlog::RowImage* image : {&change.before, &change.after}) {
                    if (image->empty()) continue;
                    std::optional<std::int64_t> id;
                    if (column && *column < image->size()) id = (*image)[*column].as_int64();
                    if (id) {
                        group.keys.insert(map.key(*b, *id));
                    } else {
                        group.flush.insert(b);  // no usable key in this image: flush the entity
                    }
                }
            }
        }
    }

    void on_query(binlog::Bytes ev) {
        binlog::QueryEvent q = binlog::decode_query(ev);
        std::string head = upper_prefix(q.query, 8);
        if (head.rfind("BEGIN", 0) == 0) return;
        if (head.rfind("COMMIT", 0) == 0) {
            finish_group();
            return;
        }
        if (head.rfind("SAVEPOIN", 0) != 0 && head.rfind("ROLLBACK", 0) != 0) {
            // A statement-format change or DDL: no row images, so every entity of every watched
            // table the statement names is flushed.
            bool touched = false;
            for (const auto& b : map.bindings()) {
                if (contains_word_ci(q.query, b.table)) {
                    group.flush.insert(&b);
                    touched = true;
                }
            }
            if (touched) count([](InvalidatorMetrics& mm) { ++mm.statement_events; });
        }
        if (group.standalone) finish_group();
    }

    void read_event(const std::vector<std::uint8_t>& bytes) {
        binlog::Bytes ev(bytes);
        binlog::EventHeader h = binlog::decode_header(ev);
        last_event_at = Clock::now();
        std::optional<double> gap;
        if (switched_after) {
            gap = std::chrono::duration<double, std::milli>(last_event_at - *switched_after).count();
            switched_after.reset();
        }
        count([&](InvalidatorMetrics& mm) {
            ++mm.events;
            if (gap) mm.failover_gap_ms = *gap;
        });
        switch (h.type) {
            case binlog::EventType::Heartbeat:
                count([](InvalidatorMetrics& mm) { ++mm.heartbeats; });
                if (!group.open) {
                    MutexLock lock(mutex);
                    last_timestamp = 0;  // nothing pending: caught up
                }
                save_position(false);
                return;
            case binlog::EventType::Gtid: {
                finish_group();  // a group without XID/COMMIT (should not happen) still lands
                group = Group{};
                group.open = true;
                group.gtid = binlog::decode_gtid(ev);
                group.standalone = group.gtid.standalone;
                group.timestamp = h.timestamp;
                group.first_event = Clock::now();
                return;
            }
            case binlog::EventType::TableMap: on_table_map(ev); return;
            case binlog::EventType::Query: on_query(ev); return;
            case binlog::EventType::Xid: finish_group(); return;
            default: break;
        }
        if (binlog::is_rows_event(h.type)) {
            on_rows(ev);
        } else if (binlog::is_compressed_event(h.type)) {
            for (const auto& b : map.bindings()) group.flush.insert(&b);  // cannot read: flush all
        }
    }

    // ---- the second DEL -----------------------------------------------------------------------

    // The re-delete thread: waits for the oldest group's due time (+ the batch window), takes
    // every due group, deletes their keys once more in one pipeline, then settles their GTIDs.
    // Once run() ends it drains the queue immediately (one attempt each); what does not land is
    // not settled, so the saved position replays it.
    void redelete_loop() EXCLUDES(mutex) {
        for (;;) {
            std::vector<binlog::Gtid> gtids;
            std::set<std::string> keys;
            std::set<const TableBinding*> flush;
            std::uint64_t taken_in = 0;
            bool draining = false;  // run() ended: take everything, due or not
            {
                MutexLock lock(mutex);
                for (;;) {
                    if (pending.empty()) {
                        if (redeleter_stop) return;
                        pending_changed.wait(mutex);
                        continue;
                    }
                    auto wake = pending.front().due + options.second_delete_batch;
                    if (redeleter_stop || Clock::now() >= wake) break;
                    pending_changed.wait_until(mutex, wake);
                }
                draining = redeleter_stop;
                const auto now = Clock::now();
                while (!pending.empty() && (draining || pending.front().due <= now)) {
                    Pending& p = pending.front();
                    gtids.push_back(p.gtid);
                    keys.merge(p.keys);
                    flush.merge(p.flush);
                    pending.pop_front();
                }
                taken_in = generation;
            }
            fault::point(invalidation_points::before_second_delete);
            bool landed = keys.empty() && flush.empty() ? true : apply(keys, flush, /*second=*/true);
            // Not landed only when stopping with Redis unreachable: nothing after it may settle
            // either (the position moves in order), so the restart replays these groups.
            if (!landed) return;
            {
                MutexLock lock(mutex);
                if (taken_in == generation) {
                    for (const auto& g : gtids) settled.update(g);
                    dirty = true;
                }
            }
        }
    }

    void start_redeleter() EXCLUDES(mutex) {
        if (options.second_delete_delay.count() <= 0) return;
        {
            MutexLock lock(mutex);
            redeleter_stop = false;
        }
        redeleter = std::thread([this] { redelete_loop(); });
    }

    void stop_redeleter() EXCLUDES(mutex) {
        if (!redeleter.joinable()) return;
        {
            MutexLock lock(mutex);
            redeleter_stop = true;
        }
        pending_changed.notify_all();
        redeleter.join();
    }

    // Where to start: the saved position, or (fresh) the server's current one.
    // A fenced follower records its epoch before it reads the position (PositionStore::claim).
    void initial_position() {
        if (options.fence_token > 0) positions->claim(options.name, options.fence_token);
        std::optional<std::string> saved = positions->load(options.name);
        if (saved) {
            set_applied(GtidState::parse(*saved));
            dirty = false;
            count([&](InvalidatorMetrics& mm) {
                mm.saved_gtid = *saved;
                mm.start_gtid = *saved;
            });
            return;
        }
        GtidState now = GtidState::parse(BinlogStream::current_gtid(mysql));
        if (options.flush_on_fresh_start) flush_all();
        set_applied(now);
        count([&](InvalidatorMetrics& mm) { mm.start_gtid = now.to_string(); });
        save_position(true);
    }

    // The position is gone (binlogs purged, or a new primary that never had it): flush
    // everything, continue from now. The current position is read BEFORE the flush, so a write
    // committed during the flush is still seen.
    void recover_lost_position() {
        std::string lost;
        {
            MutexLock lock(mutex);
            lost = applied.to_string();
            ++m.positions_lost;
        }
        logger()->warn("follower {}: {} does not have position {} (purged, or never replicated to it): flushing "
                       "every bound entity's keys and starting at its current position",
                       options.name, address(mysql), lost);
        GtidState now = GtidState::parse(BinlogStream::current_gtid(mysql));
        flush_all();
        set_applied(now);
        save_position(true);
    }

    // After a failed stream, with failover sources: the first server of [current, others...]
    // that answers and is writable becomes the source. False when none is (retried later).
    bool choose_source() EXCLUDES(mutex) {
        for (std::size_t n = 0; n < sources.size(); ++n) {
            const std::size_t i = (current + n) % sources.size();
            try {
                MysqlPool probe([&] {
                    MysqlOptions o = sources[i];
                    o.pool_size = 1;
                    o.connect_timeout = std::min(o.connect_timeout, options.read_timeout);
                    o.read_timeout = std::max(options.read_timeout, std::chrono::milliseconds(1000));
                    return o;
                }());
                auto row = probe.query_one("SELECT @@global.read_only AS ro");
                if (!row || row->get<std::int64_t>("ro") != 0) continue;
            } catch (const Error&) {
                continue;
            }
            if (i == current) return true;
            auto store = std::make_unique<PositionStore>(pool_options(sources[i], options.read_timeout));
            std::string at;
            {
                MutexLock lock(mutex);
                at = applied.to_string();
            }
            logger()->warn("follower {}: primary moved from {} to {}; resuming at GTID {}", options.name,
                           address(sources[current]), address(sources[i]), at);
            if (options.fence_token > 0) store->claim(options.name, options.fence_token);
            positions = std::move(store);
            source_probe.reset();
            current = i;
            mysql = sources[i];
            switched_after = last_event_at;
            dirty = true;  // the new primary's table gets the position at the next save
            {
                MutexLock lock(mutex);
                source_now = mysql;
                ++m.source_switches;
                m.source = address(mysql);
            }
            return true;
        }
        return false;
    }

    // A source that turned read-only (a primary demoted while it stays up) is left like a failed
    // one: what was received is applied first, then the stream is dropped and choose_source()
    // looks for the writable server.
    void check_source() {
        last_source_check = Clock::now();
        if (!source_probe) {
            MysqlOptions o = mysql;
            o.pool_size = 1;
            o.read_timeout = std::max(options.read_timeout, std::chrono::milliseconds(1000));
            source_probe = std::make_unique<MysqlPool>(o);
        }
        auto row = source_probe->query_one("SELECT @@global.read_only AS ro");
        if (!row || row->get<std::int64_t>("ro") == 0) return;
        if (!ready.empty()) flush_ready();
        throw ConnectionError("follower: " + address(mysql) + " turned read-only (demoted); looking for the primary");
    }

    // Records the server's seek once it is over; true then.
    bool count_seek(const BinlogStream& stream) {
        const auto took = stream.seek_time();
        if (!took) return false;
        count([&](InvalidatorMetrics& mm) { mm.last_seek_ms = static_cast<double>(took->count()) / 1000.0; });
        return true;
    }

    void follow_once() {
        std::string start;
        {
            MutexLock lock(mutex);
            start = applied.to_string();
        }
        BinlogStream stream({.mysql = mysql,
                             .server_id = options.server_id,
                             .start_gtid = start,
                             .heartbeat = options.heartbeat,
                             .read_timeout = options.read_timeout,
                             .seek_timeout = options.seek_timeout});
        stream.open();
        tables.clear();
        group = Group{};
        // Groups buffered on a connection that broke: the stream restarts at the applied
        // position, before them, and hands them out again.
        ready.clear();
        ready_keys = 0;
        count([](InvalidatorMetrics& mm) { mm.connected = true; });
        applied_changed.notify_all();
        fault::point(invalidation_points::after_stream_open);
        bool seek_counted = false;
        while (!stopping.load()) {
            read_event(stream.next().bytes);
            if (!seek_counted) seek_counted = count_seek(stream);
            if (flush_due(stream)) flush_ready();
            if (sources.size() > 1 && Clock::now() - last_source_check >= options.source_check) check_source();
        }
        if (!ready.empty()) flush_ready();  // stopping: one attempt, so that a clean stop saves them
    }

    void run() {
        auto backoff = options.retry_min;
        bool started = false;
        start_redeleter();
        while (!stopping.load()) {
            try {
                if (!started) {
                    initial_position();
                    started = true;
                }
                follow_once();
            } catch (const ConflictError&) {
                fenced_out();  // claim() refused: a newer leader already owns the position
                break;
            } catch (const BinlogPositionLostError&) {
                report(std::current_exception());
                try {
                    recover_lost_position();
                } catch (const Error&) {
                    report(std::current_exception());
                    pause(backoff);
                }
            } catch (const Error&) {
                report(std::current_exception());
                count([](InvalidatorMetrics& mm) {
                    ++mm.reconnects;
                    mm.connected = false;
                });
                if (!pause(backoff)) break;
                backoff = std::min(options.retry_max, backoff * 2);
                if (sources.size() > 1) {
                    try {
                        choose_source();
                    } catch (const ConflictError&) {
                        fenced_out();
                        break;
                    } catch (const Error&) {
                        report(std::current_exception());
                    }
                }
                continue;
            }
            backoff = options.retry_min;
        }
        count([](InvalidatorMetrics& mm) { mm.connected = false; });
        stop_redeleter();  // the queued second DELs land (or stay unsettled) before the save
        if (!is_fenced_out()) save_position(true);
    }
};

BinlogInvalidator::BinlogInvalidator(MysqlOptions mysql, RedisClient& redis, InvalidationMap map,
                                     BinlogInvalidatorOptions options)
    : impl_(std::make_unique<Impl>(std::move(mysql), redis, std::move(map), std::move(options))) {}

BinlogInvalidator::~BinlogInvalidator() { stop(); }

void BinlogInvalidator::start() {
    if (impl_->thread.joinable()) return;
    impl_->stopping = false;
    impl_->thread = std::thread([this] { impl_->run(); });
}

void BinlogInvalidator::stop() {
    impl_->stopping = true;
    if (impl_->thread.joinable()) impl_->thread.join();
}

void BinlogInvalidator::run() {
    impl_->stopping = false;
    impl_->run();
}

InvalidatorMetrics BinlogInvalidator::metrics() const {
    MutexLock lock(impl_->mutex);
    InvalidatorMetrics out = impl_->m;
    out.second_pending = impl_->pending.size();
    impl_->lag.fill(out);
    if (impl_->last_timestamp != 0) {
        auto now = std::chrono::system_clock::now().time_since_epoch();
        out.seconds_behind = std::max(0.0, std::chrono::duration<double>(now).count() - impl_->last_timestamp);
    }
    return out;
}

bool BinlogInvalidator::wait_caught_up(std::chrono::milliseconds timeout) {
    MysqlOptions source;
    {
        MutexLock lock(impl_->mutex);
        source = impl_->source_now;
    }
    GtidState target = GtidState::parse(BinlogStream::current_gtid(source));
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    MutexLock lock(impl_->mutex);
    while (!(impl_->m.connected && impl_->applied.covers(target))) {
        if (impl_->applied_changed.wait_until(impl_->mutex, deadline) == std::cv_status::timeout) {
            return impl_->m.connected && impl_->applied.covers(target);
        }
    }
    return true;
}

}  // namespace lockstep
