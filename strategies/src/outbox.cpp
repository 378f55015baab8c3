// The outbox's two halves: record() inside a write's transaction, and one background thread that
// prunes done rows and replays abandoned ones. Invariant: a row is deleted only after its key's
// DEL landed (by the writer, then done(); or by the replay), so no committed write loses its
// invalidation (C5).
#include "lockstep/strategies/outbox.h"

#include <atomic>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "lockstep/core/logging.h"
#include "lockstep/core/mutex.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/db/row.h"
#include "lockstep/db/transaction.h"
#include "lockstep/strategies/entry_store.h"

namespace lockstep {

namespace {

std::int64_t random_id() {
    thread_local std::mt19937_64 rng{std::random_device{}() ^ (static_cast<std::uint64_t>(std::random_device{}()) << 32)};
    std::int64_t id = 0;
    while (id == 0) id = static_cast<std::int64_t>(rng() >> 1);
    return id;
}

std::string id_list(const std::vector<std::int64_t>& ids) {
    std::string out;
    for (auto id : ids) {
        if (!out.empty()) out += ",";
        out += std::to_string(id);
    }
    return out;
}

}  // namespace

struct Outbox::State {
    MysqlPool& db;
    std::shared_ptr<EntryStore> store;
    OutboxOptions options;

    Mutex mutex;
    CondVar wake;
    bool stopping GUARDED_BY(mutex) = false;
    std::vector<std::int64_t> done_ids GUARDED_BY(mutex);
    OutboxMetrics m GUARDED_BY(mutex);
    std::thread thread;

    State(MysqlPool& d, std::shared_ptr<EntryStore> s, OutboxOptions o) : db(d), store(std::move(s)), options(o) {}

    void prune_done() EXCLUDES(mutex) {
        std::vector<std::int64_t> ids;
        {
            MutexLock lock(mutex);
            ids.swap(done_ids);
        }
        for (std::size_t at = 0; at < ids.size(); at += options.batch) {
            std::vector<std::int64_t> part(ids.begin() + static_cast<std::ptrdiff_t>(at),
                                           ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), at + options.batch)));
            try {
                db.execute("DELETE FROM outbox WHERE id IN (" + id_list(part) + ")");
                MutexLock lock(mutex);
                m.done += part.size();
            } catch (const Error&) {
                // Left in the table: the replay deletes their keys once more, then the rows.
                MutexLock lock(mutex);
                ++m.errors;
            }
        }
    }

    std::size_t replay() EXCLUDES(mutex) {
        auto rows = db.query("SELECT id, cache_key FROM outbox WHERE created_at < NOW(3) - INTERVAL ? MICROSECOND "
                             "ORDER BY created_at LIMIT ?",
                             {static_cast<std::int64_t>(options.bound.count()) * 1000, static_cast<std::int64_t>(options.batch)});
        if (rows.empty()) return 0;
        std::vector<std::string> keys;
        std::vector<std::int64_t> ids;
        for (const auto& r : rows) {
            ids.push_back(r.get<std::int64_t>("id"));
            keys.push_back(r.get<std::string>("cache_key"));
        }
        store->remove(keys);  // throws when Redis is down: the rows stay for the next round
        db.execute("DELETE FROM outbox WHERE id IN (" + id_list(ids) + ")");
        MutexLock lock(mutex);
        m.replayed += ids.size();
        return ids.size();
    }

    // The background thread: a round every replay_every, with the mutex released during it.
    void run() EXCLUDES(mutex) {
        MutexLock lock(mutex);
        while (!stopping) {
            const auto deadline = std::chrono::steady_clock::now() + options.replay_every;
            while (!stopping) {
                if (wake.wait_until(mutex, deadline) == std::cv_status::timeout) break;
            }
            if (stopping) break;
            lock.unlock();
            try {
                prune_done();
                replay();
            } catch (const Error& e) {
                logger()->warn("outbox: replay round failed: {}", e.what());
                MutexLock inner(mutex);
                ++m.errors;
            }
            lock.lock();
        }
    }
};

Outbox::Outbox(MysqlPool& db, std::shared_ptr<EntryStore> store, OutboxOptions options)
    : state_(std::make_shared<State>(db, std::move(store), options)) {
    state_->thread = std::thread([s = state_] { s->run(); });
}

Outbox::~Outbox() {
    {
        MutexLock lock(state_->mutex);
        state_->stopping = true;
    }
    state_->wake.notify_all();
    if (state_->thread.joinable()) state_->thread.join();
    try {
        state_->prune_done();
    } catch (...) {
    }
}

std::int64_t Outbox::record(Transaction& tx, const std::string& key) {
    std::int64_t id = random_id();
    tx.execute("INSERT INTO outbox (id, cache_key) VALUES (?, ?)", {id, key});
    MutexLock lock(state_->mutex);
    ++state_->m.recorded;
    return id;
}

void Outbox::done(std::int64_t id) {
    MutexLock lock(state_->mutex);
    state_->done_ids.push_back(id);
}

std::size_t Outbox::replay_once() {
    state_->prune_done();
    return state_->replay();
}

OutboxMetrics Outbox::metrics() const {
    MutexLock lock(state_->mutex);
    return state_->m;
}

const OutboxOptions& Outbox::options() const noexcept { return state_->options; }

}  // namespace lockstep
