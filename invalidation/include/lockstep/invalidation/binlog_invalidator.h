// BinlogInvalidator: follows MariaDB's binary log as a replica does and deletes the cache key of
// every changed row of a watched table, whoever changed it (the library, another service, an
// operator's UPDATE). It closes C9 (a writer that bypasses the library) and C5 (a writer that
// died after COMMIT, before its DEL) for every strategy; see docs/invalidation.md.
//
//   lockstep::RedisClient redis(servers.redis_options());
//   lockstep::BinlogInvalidator follower(servers.mysql_options(), redis,
//       lockstep::InvalidationMap({{.table = "products", .entity = "product"}}),
//       {.name = "orders-service", .server_id = 4242});
//   follower.start();                        // a background thread; or run() on your own
//   ...
//   follower.metrics().lag_p99_us            // receive -> deletes landed
//
// How it works, per transaction (GTID group) in the stream:
//   - TABLE_MAP of a watched table: decoded (column names and the key column come from the
//     FULL row metadata); ROWS events: the key column of the before image (UPDATE, DELETE) and of
//     the after image (WRITE, UPDATE: a changed key deletes both keys) becomes a cache key of
//     every entity bound to the table.
//   - At the group's end (XID, or COMMIT) the group is buffered. The buffer is flushed when the
//     stream has no further event already received (BinlogStream::has_buffered_event), or it
//     holds `batch_max_transactions` groups / `batch_max_keys` keys, or its oldest group waited
//     `batch_max_wait`: the DELs of every buffered group go out in ONE pipeline, in stream order,
//     answered in order. A group is "applied" only when every DEL of it and of every group before
//     it was acknowledged; an error reply (or a broken connection) stops the applied position at
//     the first group not acknowledged, and the rest is retried from there. A follower that keeps
//     up sees one group per flush (lag unchanged); a backlog is flushed in batches (throughput).
//     The applied position is saved (PositionStore) at most every `save_interval`, always after
//     the deletes it covers: at-least-once.
//   - The visibility window: MariaDB hands a group to dump connections just before its commit is
//     visible to other sessions, so a reader that misses in between reads the old row and caches
//     it after the DEL. Each group's keys are deleted a second time `second_delete_delay` later
//     (a thread of its own, due groups batched into one pipelined DEL), and the position saved is
//     the one whose second DELs landed. docs/invalidation.md, "The visibility window".
//   - What carries no keys gets a full flush of the affected entities' keys (SCAN + DEL): a
//     statement-format change (a session that set binlog_format=STATEMENT), TRUNCATE / DDL on a
//     watched table, a watched table with a column the decoder refuses, a key that is not a
//     BIGINT, compressed events; and a lost position (binlogs purged past the saved GTID).
//
// Versioned strategies (WriteThrough, Lease): the follower DELs too. Under Lease a DEL also
// removes a loader's marker, so that loader's fill is refused (C2 stays closed). Under
// WriteThrough a reader that read the row before the bypassing write and fills after the DEL
// can store its older version (the same C2 window WriteThenDelete has); docs/invalidation.md.
//
// Several instances, one active (`--ha`): the active one runs the follower with `fence_token` set
// to its leader epoch (coordination/leader_latch.h); every position write is fenced by it
// (PositionStore), and a write refused by a newer epoch stops the follower at once
// (`fenced_out`): a deposed instance can neither move the position nor go on deleting.
//
// A primary failover: `failover_sources` lists the servers that may become the primary (GTID
// replicas with log_slave_updates). When the stream to the current source fails, the follower
// takes the first of [current, failover_sources...] that answers and is writable
// (@@read_only = 0), and resumes there from its applied GTID state (a source that stays up but
// turns read-only, a demoted primary, is noticed within `source_check` and left the same way): the promoted replica's binlog
// holds the old primary's transactions under their own GTIDs, so nothing is skipped or replayed
// twice beyond at-least-once. When the new primary does not have that position (transactions the
// follower applied never reached it, or were purged), the follower flushes every bound entity's
// keys, logs a warning and counts it (positions_lost), and starts at the new primary's position.
// The position store moves with it (a table on the new primary).
//
// Failures: a lost or silent server (no heartbeat within read_timeout), a restart, a Redis
// outage: the follower retries with backoff and resumes from its last applied position; nothing
// is skipped. Errors go to `on_error` and the metrics; run() returns only after stop().
//
// Thread safety: start/stop/run from one owner thread; metrics() and wait_caught_up() from any.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/core/mysql_options.h"
#include "lockstep/invalidation/invalidation_map.h"

namespace lockstep {

class RedisClient;

struct BinlogInvalidatorOptions {
    // Names this follower's row in lockstep_binlog_position.
    std::string name = "default";
    // The replica id it registers with: distinct from the server's and every other follower's.
    std::uint32_t server_id = 4242;
    // Server heartbeat period, and the read timeout that declares the server dead or paused.
    std::chrono::milliseconds heartbeat{250};
    std::chrono::milliseconds read_timeout{1000};
    // How long the server may look for the start position in its binlog after a (re)connect,
    // silent but answering that the dump runs (binlog_stream.h); it grows with the binlog file.
    std::chrono::milliseconds seek_timeout{60000};
    // The applied position is saved at most this often (and on stop).
    std::chrono::milliseconds save_interval{200};
    // Backoff between reconnects / Redis retries: doubles from min to max.
    std::chrono::milliseconds retry_min{20};
    std::chrono::milliseconds retry_max{1000};
    // The second DEL of every group's keys (and flush), this long after the first; 0 turns it
    // off. It must exceed the time from a commit's binlog write to its visibility plus a reader's
    // miss (DB read + backfill) that started in that gap: the same bet as DelayedDoubleDelete's
    // delay, against a window that is microseconds on a primary.
    std::chrono::milliseconds second_delete_delay{50};
    // Due groups wait up to this much longer so that one pipelined DEL carries several: a key's
    // second DEL lands between `second_delete_delay` and `second_delete_delay + second_delete_batch`
    // after its first (plus Redis time).
    std::chrono::milliseconds second_delete_batch{5};
    // Buffered groups per flush (one pipelined round trip of DELs; see the header comment):
    // flushed as soon as the stream has nothing more already received, or at any of these bounds.
    std::size_t batch_max_transactions = 256;
    std::size_t batch_max_keys = 4096;
    std::chrono::microseconds batch_max_wait{500};
    // With no saved position: start at the server's current position, after flushing every bound
    // entity's keys (true, safe) or without flushing (false: writes before the first start are
    // not invalidated).
    bool flush_on_fresh_start = true;
    // Called (on the follower thread) with every error it recovers from.
    std::function<void(std::exception_ptr)> on_error;
    // The leader epoch of this instance's term (--ha): every position write is fenced by it, and
    // the first one refused stops the follower. 0: one instance, unfenced.
    std::int64_t fence_token = 0;
    // Servers that may become the primary; see "A primary failover" above. Empty: only `mysql`.
    std::vector<MysqlOptions> failover_sources;
    // With failover sources: how often the follower checks that its source is still writable.
    std::chrono::milliseconds source_check{1000};
};

struct InvalidatorMetrics {
    std::uint64_t events = 0;
    std::uint64_t transactions = 0;      // groups applied
    std::uint64_t rows = 0;              // changed rows of watched tables
    std::uint64_t keys_deleted = 0;      // DELs sent and acknowledged (a key may count twice)
    std::uint64_t delete_pipelines = 0;  // first-DEL round trips (pipelines sent, retries included)
    std::uint64_t delete_batches = 0;    // buffer flushes: groups whose first DELs shared a pipeline
    std::uint64_t second_keys_deleted = 0;  // second DELs sent
    std::uint64_t second_batches = 0;       // pipelined second-DEL batches
    std::uint64_t second_pending = 0;       // groups waiting for their second DEL
    std::uint64_t flushes = 0;           // full flushes of one entity (second flushes included)
    std::uint64_t flushed_keys = 0;
    std::uint64_t statement_events = 0;  // QUERY events that changed a watched table
    std::uint64_t reconnects = 0;
    std::uint64_t heartbeats = 0;
    std::uint64_t redis_errors = 0;
    std::uint64_t positions_lost = 0;
    std::uint64_t positions_saved = 0;
    std::uint64_t positions_refused = 0;  // fenced position writes refused (a newer epoch wrote)
    bool fenced_out = false;              // a refused write stopped this follower
    std::uint64_t source_switches = 0;    // moves to another server (a primary failover)
    // Last event from the previous source -> first event from the new one, at the last switch.
    double failover_gap_ms = 0;
    // The dump request -> the first event past the start position, at the last (re)connect: the
    // server reading its binlog file up to the position, silently; grows with the file.
    double last_seek_ms = 0;
    std::string source;                   // host:port followed now
    std::string start_gtid;               // where this follower started (the stored position, or fresh)
    std::string applied_gtid;
    std::string saved_gtid;
    // Server time of the last applied event to now, in seconds; 0 when caught up (a heartbeat
    // with nothing pending). The binlog's timestamps have one-second resolution.
    double seconds_behind = 0;
    // Receive of a group's first event -> its deletes landed, over the last 65536 groups.
    double lag_p50_us = 0;
    double lag_p99_us = 0;
    double lag_max_us = 0;
    bool connected = false;
};

class BinlogInvalidator {
public:
    // `redis` is borrowed and must outlive the follower. Opens a small MySQL pool for the
    // position table (created if missing). Throws ConfigError on a bad map.
    BinlogInvalidator(MysqlOptions mysql, RedisClient& redis, InvalidationMap map, BinlogInvalidatorOptions options = {});
    ~BinlogInvalidator();  // stop()
    BinlogInvalidator(const BinlogInvalidator&) = delete;
    BinlogInvalidator& operator=(const BinlogInvalidator&) = delete;

    // Runs the follower on a background thread.
    void start();
    // Stops it (within about one heartbeat), saving the applied position. Idempotent.
    void stop();
    // Runs the follower on the calling thread until stop() is called from another.
    void run();

    InvalidatorMetrics metrics() const;
    // Blocks until the stream is connected and every transaction the server had committed when
    // this was called has been applied (its keys deleted). False on timeout.
    bool wait_caught_up(std::chrono::milliseconds timeout);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep
