// FreshnessHistory: a record of cache reads and writes of many keys by many threads and
// processes, and the checker that says whether the reads were fresh: every read returns a
// version at least as new as the newest write of its key that had *completed* before the read
// was *invoked* ("I wrote it, then read the old value" never happens), except inside a bound the
// caller allows (a strategy's documented staleness window: a TTL, a delay). Reads stale within
// the bound are counted; beyond it each is an anomaly with its evidence, the write and the read.
//
//   lockstep::FreshnessHistory history("WriteThenDelete+None");
//   // in each client thread:
//   auto t = lockstep::monotonic_us();
//   auto stored = repo.update(id, fn);
//   history.write_done(thread, key, t, stored->version);
//   t = lockstep::monotonic_us();
//   auto v = repo.get_versioned(id);
//   history.read_done(thread, key, t, v->version);
//   ...
//   auto check = history.check(std::chrono::seconds(1));   // the strategy's bound
//   if (!check.ok()) ADD_FAILURE() << check.describe();
//
// Times are CLOCK_MONOTONIC microseconds (monotonic_us(), hold_history.h), comparable across the
// processes of one machine; a child sends FreshnessOp::to_line() lines. Each time is taken on the
// conservative side: a read's invocation before the call, a write's completion after it
// returned, so a read and a write that overlapped are never compared.
//
// A write that failed or whose outcome is unknown may or may not have taken effect. It counts
// only when some read returned exactly its version (so its version must be known): it took effect,
// and a read invoked after both the write's end and that read's completion must see it. A read
// that failed is not judged; a read of "nothing" is recorded as version 0.
//
// Thread safety: recording (add, read_done, write_done) from any thread, cheaply: each thread
// appends to one of a few buffers under its own mutex, so recorder threads rarely contend.
// ops() and check() may run at any time and see what was recorded before them.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/core/mutex.h"
#include "lockstep/core/thread_annotations.h"
#include "lockstep/servers/hold_history.h"

namespace lockstep {

struct FreshnessOp {
    enum class Kind { Read, Write };
    enum class Outcome { Ok, Failed, Unknown };
    int process = 0;          // any label of the process: its index or pid
    int thread = 0;           // the recording thread, within the process
    std::string key;          // without spaces
    Kind kind = Kind::Read;
    std::int64_t version = 0;  // read, or written (0: unknown)
    std::int64_t invoke_us = 0;    // monotonic_us() before the call
    std::int64_t complete_us = 0;  // monotonic_us() after it returned (or failed)
    Outcome outcome = Outcome::Ok;

    // "fresh <process> <thread> <key> <read|write> <version> <invoke_us> <complete_us> <ok|failed|unknown>"
    std::string to_line() const;
    static std::optional<FreshnessOp> from_line(const std::string& line);
};

// A read that returned a version older than `write`'s, invoked `late_us` after `write` completed
// (for a failed or unknown write: after it was seen by another read, whichever is later).
struct FreshnessAnomaly {
    FreshnessOp write;
    FreshnessOp read;
    std::int64_t late_us = 0;
    // The minimal history that shows it: the write and the read, times relative to the write's
    // invocation.
    std::string describe() const;
};

struct FreshnessCheck {
    std::string label;           // the history's: strategy and lock mode
    std::int64_t allowed_us = 0;  // the bound checked against
    std::size_t reads = 0;        // reads judged (outcome ok)
    std::size_t writes = 0;       // writes that count (ok, or failed/unknown and seen)
    std::size_t stale_within_bound = 0;
    std::int64_t max_late_us = 0;  // the latest stale read, within the bound or not
    std::vector<FreshnessAnomaly> anomalies;  // stale beyond the bound, in order of the read's invocation

    bool ok() const { return anomalies.empty(); }
    // "<label>: 1234 reads, 3 stale within 1000 ms, 0 anomalies (latest stale read +12 ms)"
    std::string summary() const;
    // summary() and the evidence of the first `max_shown` anomalies.
    std::string describe(std::size_t max_shown = 3) const;
};

// The checker alone, on operations from anywhere (any order, any number of keys).
FreshnessCheck check_freshness(const std::vector<FreshnessOp>& ops, std::chrono::microseconds allowed_staleness,
                               std::string label = {});

class FreshnessHistory {
public:
    // `label` names what is checked (e.g. "WriteThenDelete+None"); `process` is stamped on
    // every operation recorded here.
    explicit FreshnessHistory(std::string label = {}, int process = 0);
    FreshnessHistory(const FreshnessHistory&) = delete;
    FreshnessHistory& operator=(const FreshnessHistory&) = delete;

    // Records an operation that began at `invoke_us` (monotonic_us() before the call) and
    // completes now.
    void read_done(int thread, std::string_view key, std::int64_t invoke_us, std::int64_t version,
                   FreshnessOp::Outcome outcome = FreshnessOp::Outcome::Ok);
    void write_done(int thread, std::string_view key, std::int64_t invoke_us, std::int64_t version,
                    FreshnessOp::Outcome outcome = FreshnessOp::Outcome::Ok);
    // Records an operation as given (e.g. parsed from a child's line).
    void add(FreshnessOp op);

    const std::string& label() const { return label_; }
    std::vector<FreshnessOp> ops() const;
    std::size_t size() const;
    FreshnessCheck check(std::chrono::microseconds allowed_staleness) const;

private:
    static constexpr std::size_t kShards = 16;
    struct alignas(64) Shard {
        mutable Mutex mu;
        std::vector<FreshnessOp> ops GUARDED_BY(mu);
    };
    Shard& my_shard();

    std::string label_;
    int process_;
    std::array<Shard, kShards> shards_;
};

}  // namespace lockstep
