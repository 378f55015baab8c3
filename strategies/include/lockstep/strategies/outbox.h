// Outbox: a transactional outbox for cache invalidation (closes C5 for the library's own
// writers, without a binlog follower).
//
//   auto outbox = std::make_shared<lockstep::Outbox>(pool, lockstep::make_redis_entry_store(redis),
//                                                    lockstep::OutboxOptions{.bound = 1s});
//   RepositoryOptions o;  o.outbox = outbox;     // every write of that repository records a row
//
// Every write inserts a row (its cache key) into the `outbox` table inside the write's own
// transaction, so the row exists if and only if the write committed. After COMMIT, once the
// strategy's cache operation has landed (its DEL, or WriteThrough's set), the row is done: it is
// deleted, in batches, by this object's thread (done = pruned). The same thread replays: every
// row older than `bound` that is still there belongs to a writer that died (SIGKILL, crash,
// power) or could not reach Redis between COMMIT and its DEL; its key is deleted and then the
// row. So a writer killed after COMMIT leaves its entry stale for at most about
// `bound + replay_every`, not until the TTL. Any process with an Outbox replays every row (a
// service's dead peer included).
//
// Row ids are random 63-bit numbers chosen here (not AUTO_INCREMENT), so that marking a row
// done needs no extra round trip for LAST_INSERT_ID(); a collision needs two live rows with the
// same id (probability about n^2 / 2^64 for n rows not yet pruned) and fails only that write
// (a duplicate-key DbError, RetryTransaction).
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace lockstep {

class EntryStore;
class MysqlPool;
class Transaction;

// The outbox table's statement (CREATE TABLE IF NOT EXISTS; for operators who create their
// schema by hand), and a call that runs it and then checks the columns Outbox uses: ConfigError
// naming a missing column of a table that already existed. Idempotent, safe from several
// processes at once; DbError / ConnectionError as any statement.
std::string_view outbox_table_statement();
void create_outbox_table(MysqlPool& db);

struct OutboxOptions {
    // A row not done after this long is replayed (its key deleted). Longer than a normal
    // write's COMMIT-to-DEL time, or live writers' keys get an extra DEL.
    std::chrono::milliseconds bound{std::chrono::seconds(1)};
    // How often the thread deletes done rows and looks for rows to replay.
    std::chrono::milliseconds replay_every{std::chrono::milliseconds(100)};
    // Rows per replay query.
    std::size_t batch = 500;
};

struct OutboxMetrics {
    std::uint64_t recorded = 0;  // rows written inside a write's transaction
    std::uint64_t done = 0;      // rows deleted after their write's cache operation landed
    std::uint64_t replayed = 0;  // rows of writers that never finished: keys deleted, rows deleted
    std::uint64_t errors = 0;    // failed background rounds (retried next round)
};

class Outbox {
public:
    // `db` is borrowed and must outlive the outbox. Starts the background thread.
    Outbox(MysqlPool& db, std::shared_ptr<EntryStore> store, OutboxOptions options = {});
    ~Outbox();
    Outbox(const Outbox&) = delete;
    Outbox& operator=(const Outbox&) = delete;

    // Inside `tx`: records `key`. Returns the row id.
    std::int64_t record(Transaction& tx, const std::string& key);
    // After COMMIT and the key's cache operation: the row may go.
    void done(std::int64_t id);
    // One replay round now (the thread runs these too): deletes the keys of rows older than
    // `bound`, then the rows. Returns how many rows it replayed.
    std::size_t replay_once();

    OutboxMetrics metrics() const;
    const OutboxOptions& options() const noexcept;

private:
    struct State;
    std::shared_ptr<State> state_;
};

}  // namespace lockstep
