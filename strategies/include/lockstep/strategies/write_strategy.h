// WriteStrategy: what a CachedRepository does to the cache around each write, and how a read
// miss backfills. One small interface; each strategy is one file:
//
//   WriteThenDelete        commit, then DEL                                    (the usual default)
//   DelayedDoubleDelete    DEL, commit, DEL, and one more DEL after a delay on a background timer
//   TtlBounding            commit, then DEL; every entry's TTL capped: damage bounded in time
//   WriteThrough           commit, then set the new value only if the cached one is older (C1)
//   Lease                  readers fill only while holding their own marker; writers DEL (C2, C4)
//   (demo/ adds DeleteThenCommit and WriteThenSet, broken on purpose to show C3 and C1 open)
//
// docs/strategies.md has the matrix: which race each one closes, narrows or leaves open, with
// each lock mode, and what it costs.
//
// A write runs: [lock] -> BEGIN -> SELECT ... FOR UPDATE -> UPDATE ... version = version + 1
//   -> before_commit() -> fault point "repo.before_commit" -> COMMIT
//   -> fault point "repo.after_commit" -> after_commit() -> [unlock]
//
// Thread safety: strategies are immutable after construction and shared by every thread of
// every repository that uses them.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "lockstep/strategies/entry_store.h"

namespace lockstep {

// The cache side of one write, as a strategy sees it. Implemented by the repository.
class WriteContext {
public:
    enum class Kind { Insert, Update, Remove };

    virtual ~WriteContext() = default;

    virtual Kind kind() const noexcept = 0;
    // The cache key of the written row.
    virtual const std::string& key() const noexcept = 0;
    // The row's version after this write (for Remove: the version it had).
    virtual std::int64_t version() const noexcept = 0;

    // DEL now. A failure (Redis down) is logged, counted and handed to the retry queue, which
    // retries in the background with backoff; it never fails the write.
    virtual void delete_now() = 0;
    // DEL after `delay` on the repository's background scheduler: the writer does not wait.
    virtual void delete_after(std::chrono::milliseconds delay) = 0;
    // Sets the new value, version-checked (FillMode::IfNewer), with the repository's TTL.
    // Only valid when the strategy asked for the entry (needs_entry()) and kind() is not Remove.
    // A failure is handled as a failed delete_now() (the key is deleted later instead).
    virtual void set_if_newer() = 0;
    // Sets the new value unconditionally (WriteThenSet, demo only). Failure as set_if_newer().
    virtual void set_unconditionally() = 0;
};

class WriteStrategy {
public:
    virtual ~WriteStrategy() = default;

    // For logs, metrics and the demo, e.g. "DelayedDoubleDelete(500ms)".
    virtual std::string name() const = 0;

    // Inside the transaction: the row is written and locked, not yet visible to others.
    virtual void before_commit(WriteContext&) const {}
    // After COMMIT succeeded.
    virtual void after_commit(WriteContext& write) const = 0;

    // True when before_commit() starts with delete_now(): the repository may then send that DEL
    // earlier in the transaction (once the row is locked) and collect its reply in delete_now(),
    // so its round trip overlaps the UPDATE's instead of adding to the write.
    virtual bool deletes_before_commit() const noexcept { return false; }

    // How a read miss backfills the value it loaded.
    virtual FillMode fill_mode() const noexcept { return FillMode::Always; }
    // True when after_commit() sets the new value: the repository then re-reads the written row
    // inside the transaction (one more statement) to encode exactly what a reader would load.
    virtual bool needs_entry() const noexcept { return false; }
    // The TTL of an entry this strategy lets the repository store, given the one the options
    // ask for (TTL + jitter). TtlBounding caps it.
    virtual std::chrono::milliseconds entry_ttl(std::chrono::milliseconds requested) const { return requested; }
};

}  // namespace lockstep
