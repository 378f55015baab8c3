// The transactional outbox (strategies/outbox.h): C5 with a real SIGKILL of the writer process
// after COMMIT, closed without any binlog follower; done rows are pruned; the write cost.
#include <gtest/gtest.h>

#include <thread>

#include "invalidation_test_support.h"
#include "lockstep/strategies/outbox.h"
#include "lockstep/strategies/write_then_delete.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

std::int64_t outbox_rows_for(const std::string& key) {
    return db().query_one("SELECT COUNT(*) AS n FROM outbox WHERE cache_key = ?", {key})->get<std::int64_t>("n");
}

class OutboxTest : public ::testing::Test {
protected:
    void SetUp() override {
        prefix_ = fresh_prefix();
        id_ = fresh_id();
    }
    void TearDown() override {
        // A test may have restarted mariadbd: a pooled connection opened before the restart then
        // fails once with a RetryCall error (2013) and is discarded; the retry gets a new one.
        for (int attempt = 0;; ++attempt) {
            try {
                db().execute("DELETE FROM products WHERE id = ?", {id_});
                return;
            } catch (const Error& e) {
                if (attempt > 0 || e.recovery() != Recovery::RetryCall) throw;
            }
        }
    }

    std::unique_ptr<CachedRepository<Item>> repository(std::shared_ptr<Outbox> outbox) {
        RepositoryOptions o;
        o.key_prefix = prefix_;
        o.strategy = std::make_shared<WriteThenDelete>();
        o.ttl = 60s;
        o.outbox = std::move(outbox);
        return std::make_unique<CachedRepository<Item>>(item_entity(), db(), redis(), o);
    }

    std::string prefix_;
    std::int64_t id_ = 0;
};

TEST_F(OutboxTest, AFinishedWriteLeavesNoRowBehind) {
    auto outbox = std::make_shared<Outbox>(db(), make_redis_entry_store(redis()), OutboxOptions{.bound = 10s, .replay_every = 20ms});
    auto repo = repository(outbox);
    repo->insert(Item{id_, "widget", 100, 5});
    repo->update(id_, [](Item& p) { p.price = 150; });
    auto deadline = std::chrono::steady_clock::now() + 5s;
    while (outbox_rows_for(repo->key_of(id_)) > 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
    EXPECT_EQ(outbox_rows_for(repo->key_of(id_)), 0);
    EXPECT_EQ(outbox->metrics().recorded, 2u);
    EXPECT_TRUE(eventually([&] { return outbox->metrics().done == 2; }));
    EXPECT_EQ(outbox->metrics().replayed, 0u);
}

TEST_F(OutboxTest, C5ClosedTheOutboxReplaysTheWriteOfAWriterKilledAfterCommit) {
    auto plain = repository(nullptr);
    plain->insert(Item{id_, "widget", 100, 5});
    ASSERT_EQ(plain->get(id_)->price, 100);
    const std::string key = plain->key_of(id_);
    Child writer("writer_dies_after_commit",
                 {{"PREFIX", prefix_}, {"ID", std::to_string(id_)}, {"PRICE", "300"}, {"OUTBOX", "1"}});
    ASSERT_TRUE(writer.expect("committed", 20s).has_value());
    writer.kill_now();
    auto killed_at = std::chrono::steady_clock::now();
    EXPECT_EQ(outbox_rows_for(key), 1) << "the row committed with the write and nobody marked it done";
    // Another process's outbox (this one) replays it once it is older than the bound.
    const OutboxOptions options{.bound = 300ms, .replay_every = 50ms};
    Outbox survivor(db(), make_redis_entry_store(redis()), options);
    auto gone = time_until_gone(key, 10s);
    ASSERT_TRUE(gone.has_value());
    auto stale_for = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killed_at);
    EXPECT_LE(stale_for, options.bound + 4 * options.replay_every + 500ms);
    EXPECT_EQ(plain->get(id_)->price, 300);
    EXPECT_TRUE(eventually([&] { return survivor.metrics().replayed >= 1; }));
    std::printf("C5 outbox: entry stale for %lld ms after the SIGKILL (bound %lld ms, rounds every %lld ms)\n",
                static_cast<long long>(stale_for.count()), static_cast<long long>(options.bound.count()),
                static_cast<long long>(options.replay_every.count()));
}

TEST_F(OutboxTest, WriteCostWithAndWithoutTheOutbox) {
    auto outbox = std::make_shared<Outbox>(db(), make_redis_entry_store(redis()), OutboxOptions{.bound = 10s});
    auto with = repository(outbox);
    auto without = repository(nullptr);
    with->insert(Item{id_, "widget", 100, 5});
    constexpr int kWrites = 300;
    auto time_updates = [&](CachedRepository<Item>& repo) {
        auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < kWrites; ++i) repo.update(id_, [&](Item& p) { p.price = 100 + i; });
        return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / kWrites;
    };
    time_updates(*without);  // warm up both paths
    time_updates(*with);
    double plain_us = time_updates(*without), outbox_us = time_updates(*with);
    std::printf("outbox write cost: %.1f us/update without, %.1f us with, ratio %.2f\n", plain_us, outbox_us,
                outbox_us / plain_us);
    EXPECT_GT(outbox_us, 0);
}

}  // namespace
}  // namespace lockstep::test
