// Random SIGKILL of writers mid-update through CachedRepository (WriteThenDelete, ReadWrite
// locks), while this process reads and writes the same rows. The claims under attack: after the
// writers are gone and the background work drained, every cached entry is no older than its
// row, or is gone within the documented bound (a writer killed between COMMIT and its delete
// leaves the old entry until its TTL, docs/strategies.md); and the survivors' writes keep going
// (a killed waiter's claim does not block the name: B1).
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "adversary.h"
#include "locks_test_support.h"
#include "lockstep/locks/redis_lock_service.h"
#include "lockstep/strategies/cached_repository.h"
#include "lockstep/strategies/write_then_delete.h"
#include "test_servers.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(AdversarialSigkill, KilledWritersLeaveNoEntryOlderThanItsRowPastTheBound) {
    constexpr int kRows = 5;
    const auto ttl = 2000ms;
    const auto lease = 900ms;
    MysqlPool pool(test::servers().mysql_options());
    adversary::create_tables(pool);
    pool.execute("DELETE FROM adv_items");
    for (int id = 1; id <= kRows; ++id) pool.execute("INSERT INTO adv_items (id, name) VALUES (?, 'start')", {id});
    // Committed updates, counted by the database in each update's own transaction: a writer killed
    // before its COMMIT rolls its count back with its update. One counter row per item row, so the
    // count takes no lock the update does not already hold. (A row's version is no count: it
    // follows the database clock, docs/strategies.md.)
    pool.execute("CREATE TABLE IF NOT EXISTS adv_item_updates (id BIGINT NOT NULL PRIMARY KEY, n BIGINT NOT NULL) "
                 "ENGINE=InnoDB");
    pool.execute("DELETE FROM adv_item_updates");
    for (int id = 1; id <= kRows; ++id) pool.execute("INSERT INTO adv_item_updates (id, n) VALUES (?, 0)", {id});
    pool.execute("DROP TRIGGER IF EXISTS adv_items_count_updates");
    pool.execute(
        "CREATE TRIGGER adv_items_count_updates AFTER UPDATE ON adv_items FOR EACH ROW "
        "UPDATE adv_item_updates SET n = n + 1 WHERE id = NEW.id");
    const std::string prefix = "adv" + std::to_string(::getpid()) + ":";

    RedisOptions ro = test::servers().redis_options();
    ro.pool_size = 8;
    RedisClient redis(ro);
    LockClientOptions lo;
    lo.prefix = prefix;
    RedisLockClient locks(redis, lo);
    RedisLockService lock_service(locks);
    RepositoryOptions o;
    o.strategy = std::make_shared<WriteThenDelete>();
    o.lock_mode = LockMode::ReadWrite;
    o.lock_service = &lock_service;
    o.lock_lease = lease;
    o.lock_wait = 3s;
    o.key_prefix = prefix;
    o.ttl = ttl;
    o.ttl_jitter = 0ms;
    CachedRepository<adversary::Item> repo(adversary::item_entity(), pool, redis, o);

    adversary::Tally tally("random SIGKILL of writers mid-update (CachedRepository, WriteThenDelete, ReadWrite)");
    const std::map<std::string, std::string> env = {{"PREFIX", prefix},
                                                    {"ROWS", std::to_string(kRows)},
                                                    {"LEASE_MS", std::to_string(lease.count())},
                                                    {"TTL_MS", std::to_string(ttl.count())}};
    std::vector<std::unique_ptr<test::Child>> writers;
    for (int i = 0; i < 3; ++i) writers.push_back(std::make_unique<test::Child>("repo_writer", env));
    for (auto& w : writers) ASSERT_TRUE(w->expect("READY", 20s));

    std::atomic<bool> stop{false};
    std::atomic<long> reads{0}, own_writes{0}, own_write_failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
        threads.emplace_back([&, t] {
            std::mt19937 rng(static_cast<unsigned>(t + 17));
            while (!stop.load()) {
                try {
                    repo.get(1 + rng() % kRows);
                    reads.fetch_add(1);
                } catch (const std::exception&) {
                }
            }
        });
    }
    threads.emplace_back([&] {
        std::mt19937 rng(99);
        while (!stop.load()) {
            try {
                repo.update(1 + rng() % kRows, [](adversary::Item& i) { i.name = "parent"; });
                own_writes.fetch_add(1);
            } catch (const std::exception&) {
                own_write_failures.fetch_add(1);
            }
            std::this_thread::sleep_for(20ms);
        }
    });

    // The attack: every 150-400 ms one writer is SIGKILLed wherever it is and replaced.
    std::mt19937 rng(7);
    const auto end = Clock::now() + 8s;
    long kills = 0;
    while (Clock::now() < end) {
        std::this_thread::sleep_for(std::chrono::milliseconds(150 + rng() % 250));
        auto& victim = writers[rng() % writers.size()];
        victim->signal(SIGKILL);
        victim->wait();
        ++kills;
        tally.iteration();
        victim = std::make_unique<test::Child>("repo_writer", env);
    }
    for (auto& w : writers) {
        w->signal(SIGKILL);
        w->wait();
    }
    stop = true;
    for (auto& t : threads) t.join();
    const auto drained_at = Clock::now();
    (void)repo.settle(5s);

    // Stale entries right after the drain are allowed (a kill between COMMIT and delete); past
    // the bound (TTL, plus a lease for a fill under a killed holder's lock) none may be left.
    auto stale_rows = [&] {
        std::vector<std::int64_t> stale;
        for (int id = 1; id <= kRows; ++id) {
            auto cached = repo.get_versioned(id);
            const auto row = pool.query_one("SELECT version FROM adv_items WHERE id = ?", {id});
            if (cached && row && cached->version < row->get<std::int64_t>("version")) stale.push_back(id);
        }
        return stale;
    };
    const auto stale_at_drain = stale_rows();
    std::this_thread::sleep_until(drained_at + ttl + lease + 500ms);
    const auto stale_after_bound = stale_rows();
    for (auto id : stale_after_bound) {
        tally.violation("row " + std::to_string(id) + ": cached entry older than the row after the bound");
    }
    if (own_writes.load() == 0) tally.violation("no write of this process succeeded: the names were blocked");
    const auto committed = pool.query_one("SELECT CAST(SUM(n) AS SIGNED) AS n FROM adv_item_updates")->get<std::int64_t>("n");
    pool.execute("DROP TRIGGER IF EXISTS adv_items_count_updates");
    tally.print(std::to_string(kills) + " writers killed, " + std::to_string(committed) + " committed updates, " +
                std::to_string(reads.load()) + " reads, own writes " + std::to_string(own_writes.load()) + " ok / " +
                std::to_string(own_write_failures.load()) + " failed, " + std::to_string(stale_at_drain.size()) +
                " stale entr(ies) at the drain, " + std::to_string(stale_after_bound.size()) + " after the bound");
    EXPECT_EQ(tally.violations(), 0u);
}

}  // namespace
}  // namespace lockstep
