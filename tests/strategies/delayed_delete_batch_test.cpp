// DelayedDoubleDelete's delayed DELs are batched: every key due when the scheduler
// wakes goes out in one pipeline, each key is deleted, and a batch that fails hands its keys to
// the retry queue (C5). Forced: the shared scheduler is held busy by a task that waits on a
// promise until every delayed DEL is due, so they are due together whatever the machine's load.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "strategies_test_support.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

// Records each remove() call (one call is one pipeline); fails the first call of more than one
// key with ConnectionError when `fail_first_batch` is set.
class RecordingStore final : public EntryStore {
public:
    explicit RecordingStore(std::shared_ptr<EntryStore> inner) : inner_(std::move(inner)) {}
    std::atomic<bool> fail_first_batch{false};

    std::vector<std::vector<std::string>> removes() const {
        std::lock_guard lock(mutex_);
        return removes_;
    }

    std::optional<std::string> get(const std::string& key) override { return inner_->get(key); }
    std::vector<std::optional<std::string>> get_many(const std::vector<std::string>& keys) override {
        return inner_->get_many(keys);
    }
    Claim claim(const std::string& key, const std::string& marker, std::chrono::milliseconds ttl) override {
        return inner_->claim(key, marker, ttl);
    }
    std::vector<Claim> claim_many(const std::vector<std::string>& keys, const std::vector<std::string>& markers,
                                  std::chrono::milliseconds ttl) override {
        return inner_->claim_many(keys, markers, ttl);
    }
    FillOutcome fill(const Fill& f) override { return inner_->fill(f); }
    std::vector<FillOutcome> fill_many(const std::vector<Fill>& fills) override { return inner_->fill_many(fills); }
    bool remove_if_equals(const std::string& key, const std::string& expected) override {
        return inner_->remove_if_equals(key, expected);
    }
    void remove(const std::vector<std::string>& keys) override {
        {
            std::lock_guard lock(mutex_);
            removes_.push_back(keys);
        }
        if (keys.size() > 1 && fail_first_batch.exchange(false)) throw ConnectionError("injected: batch failed");
        inner_->remove(keys);
    }

private:
    std::shared_ptr<EntryStore> inner_;
    mutable std::mutex mutex_;
    std::vector<std::vector<std::string>> removes_;
};

class DelayedDeleteBatchTest : public ::testing::Test {
protected:
    static constexpr auto kDelay = 200ms;

    void SetUp() override {
        store_ = std::make_shared<RecordingStore>(make_redis_entry_store(redis()));
        RepositoryOptions o;
        o.key_prefix = unique_key_prefix();
        o.strategy = std::make_shared<DelayedDoubleDelete>(kDelay);
        o.scheduler = scheduler_;
        o.delete_retry_initial = 20ms;
        o.delete_retry_max = 100ms;
        repo_ = std::make_unique<CachedRepository<Product>>(product_entity(), db(), store_, o);
        for (int i = 0; i < 3; ++i) {
            ids_.push_back(cleanup_.add(unique_id()));
            insert_product(ids_.back(), 1);
        }
    }

    // Holds the scheduler's thread until release(); the delayed DELs queue up behind it.
    void hold_scheduler() {
        scheduler_->run_after(0ms, [f = gate_.get_future().share()] { f.wait(); });
    }
    void release() { gate_.set_value(); }

    // Updates every row, then re-fills its entry (the backfill the delayed DEL exists for).
    // Returns when the last delayed DEL is due at the latest.
    std::chrono::steady_clock::time_point write_all() {
        for (auto id : ids_) repo_->update(id, [](Product& p) { p.price = 2; });
        const auto all_due = std::chrono::steady_clock::now() + kDelay;
        for (auto id : ids_) {
            EXPECT_EQ(repo_->get(id)->price, 2);
            EXPECT_TRUE(cached_entry(repo_->key_of(id)));
        }
        return all_due;
    }

    std::vector<std::string> sorted_keys() const {
        std::vector<std::string> keys;
        for (auto id : ids_) keys.push_back(repo_->key_of(id));
        std::sort(keys.begin(), keys.end());
        return keys;
    }

    ProductCleanup cleanup_;
    std::shared_ptr<BackgroundScheduler> scheduler_ = std::make_shared<BackgroundScheduler>();
    std::shared_ptr<RecordingStore> store_;
    std::unique_ptr<CachedRepository<Product>> repo_;
    std::vector<std::int64_t> ids_;
    std::promise<void> gate_;
};

TEST_F(DelayedDeleteBatchTest, DelayedDeletesDueTogetherGoOutInOnePipeline) {
    hold_scheduler();
    const auto all_due = write_all();
    const std::size_t before = store_->removes().size();  // the writers' own post-commit DELs
    std::this_thread::sleep_until(all_due);  // a time condition: every delayed DEL is due now
    release();
    ASSERT_TRUE(repo_->settle(10s));

    const auto removes = store_->removes();
    ASSERT_EQ(removes.size(), before + 1) << "one pipeline for the three due DELs";
    EXPECT_EQ(removes.back(), sorted_keys());
    for (auto id : ids_) EXPECT_FALSE(cached_entry(repo_->key_of(id))) << id;
    const auto m = repo_->metrics();
    EXPECT_EQ(m.deletes_failed, 0u);
    EXPECT_EQ(m.deletes_pending, 0u);
}

TEST_F(DelayedDeleteBatchTest, AFailedBatchSendsEachKeyToTheRetryQueue) {
    store_->fail_first_batch = true;
    hold_scheduler();
    const auto all_due = write_all();
    const std::size_t before = store_->removes().size();
    std::this_thread::sleep_until(all_due);
    release();
    ASSERT_TRUE(repo_->settle(10s));  // the retries are scheduler tasks too

    const auto removes = store_->removes();
    ASSERT_GT(removes.size(), before + 1);
    EXPECT_EQ(removes[before], sorted_keys()) << "the batch that failed";
    std::vector<std::string> retried;
    for (std::size_t i = before + 1; i < removes.size(); ++i) {
        ASSERT_EQ(removes[i].size(), 1u) << "retries go one key at a time";
        retried.push_back(removes[i][0]);
    }
    std::sort(retried.begin(), retried.end());
    EXPECT_EQ(retried, sorted_keys());
    for (auto id : ids_) EXPECT_FALSE(cached_entry(repo_->key_of(id))) << id;
    const auto m = repo_->metrics();
    EXPECT_EQ(m.deletes_failed, 3u);
    EXPECT_EQ(m.deletes_retried, 3u);
    EXPECT_EQ(m.deletes_pending, 0u);
    EXPECT_EQ(m.deletes_abandoned, 0u);
}

}  // namespace
}  // namespace lockstep::test
