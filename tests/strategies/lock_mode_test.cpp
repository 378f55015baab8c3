// What exactly each lock mode guarantees, beyond the race matrix: Mutex locks only the miss path
// (a hit inside a write's commit-to-delete window returns the previous value), ReadWrite locks
// every read (that hit waits for the write); a lock lost under a reader is counted and answered
// with a compensating delete.
#include <gtest/gtest.h>

#include "strategies_test_support.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

class LockModeTest : public ::testing::Test {
protected:
    std::unique_ptr<CachedRepository<Product>> repo(LockMode mode, std::shared_ptr<const WriteStrategy> s = nullptr) {
        RepositoryOptions o;
        o.key_prefix = prefix_;
        o.strategy = std::move(s);
        o.lock_mode = mode;
        o.lock_service = &lock_service();
        o.lock_wait = 10s;
        return std::make_unique<CachedRepository<Product>>(product_entity(), db(), redis(), o);
    }
    std::string prefix_ = unique_key_prefix();
    ProductCleanup cleanup_;
};

// A hit between a write's COMMIT and its DEL: Mutex serves the previous value at once, ReadWrite
// waits for the write and serves the new one.
TEST_F(LockModeTest, MutexHitsDoNotLockSoTheyMaySeeThePreviousValueInsideTheWriteWindow) {
    for (auto mode : {LockMode::Mutex, LockMode::ReadWrite}) {
        SCOPED_TRACE(std::string(to_string(mode)));
        auto reader = repo(mode);
        auto writer = repo(mode);
        const auto id = cleanup_.add(unique_id());
        insert_product(id, 1);
        ASSERT_EQ(reader->get(id)->price, 1);  // cached
        fault::Gate gate;
        Actor w("writer", [&] {
            auto armed = arm_for_this_thread(repo_points::after_commit, gate);
            writer->update(id, [](Product& p) { p.price = 2; });
        });
        ASSERT_TRUE(gate.wait_arrivals(1, 10s));
        const auto waits = reader->metrics().lock_waits;
        std::int64_t seen = 0;
        Actor r("reader", [&] { seen = reader->get(id)->price; });
        auto state = wait_done_or_blocked(r, [&] { return reader->metrics().lock_waits; }, waits, 10s);
        if (mode == LockMode::Mutex) {
            EXPECT_EQ(state, ActorState::Done) << "a hit takes no lock";
        } else {
            EXPECT_EQ(state, ActorState::BlockedOnLock) << "every read takes the shared lock";
        }
        gate.open();
        w.join();
        r.join();
        EXPECT_EQ(seen, mode == LockMode::Mutex ? 1 : 2);
        EXPECT_EQ(reader->get(id)->price, 2) << "either way the cache is right once the write returned";
        redis().del({reader->key_of(id)});
    }
}

// The reader's lock vanishes while it loads (as if its lease ran out). A writer takes the lock,
// commits and deletes; the reader's late backfill is stale, so at unlock the reader finds its
// hold lost, counts it, and deletes the key.
TEST_F(LockModeTest, ALockLostUnderAReaderIsCountedAndTheKeyDeleted) {
    for (auto mode : {LockMode::Mutex, LockMode::ReadWrite}) {
        SCOPED_TRACE(std::string(to_string(mode)));
        auto reader = repo(mode);
        auto writer = repo(mode);
        const auto id = cleanup_.add(unique_id());
        insert_product(id, 1);
        fault::Gate gate;
        Actor r("reader", [&] {
            auto armed = arm_for_this_thread(repo_points::after_db_read, gate);
            EXPECT_EQ(reader->get(id)->price, 1);
        });
        ASSERT_TRUE(gate.wait_arrivals(1, 10s));
        const auto keys = locks().keys(reader->keys().lock_name(id));
        redis().del({keys.mutex(), keys.rw_readers(), keys.rw_reader_expiry()});
        writer->update(id, [](Product& p) { p.price = 2; });  // not blocked: the lock is gone
        gate.open();
        r.join();
        EXPECT_EQ(reader->metrics().locks_lost, 1u) << to_string(reader->metrics());
        ASSERT_TRUE(reader->settle(10s));
        EXPECT_EQ(freshness(reader->key_of(id), id), Freshness::Fresh) << "the compensating delete removed it";
        EXPECT_EQ(reader->get(id)->price, 2);
        redis().del({reader->key_of(id)});
    }
}

TEST_F(LockModeTest, AWriteThatCannotGetTheLockInTimeFailsWithTimeoutError) {
    RepositoryOptions o;
    o.key_prefix = prefix_;
    o.lock_mode = LockMode::Mutex;
    o.lock_service = &lock_service();
    o.lock_wait = 100ms;
    CachedRepository<Product> impatient(product_entity(), db(), redis(), o);
    auto holder = repo(LockMode::Mutex);
    const auto id = cleanup_.add(unique_id());
    insert_product(id, 1);
    fault::Gate gate;
    Actor w("holder", [&] {
        auto armed = arm_for_this_thread(repo_points::after_commit, gate);
        holder->update(id, [](Product& p) { p.price = 2; });
    });
    ASSERT_TRUE(gate.wait_arrivals(1, 10s));
    try {
        impatient.update(id, [](Product& p) { p.price = 3; });
        ADD_FAILURE() << "expected TimeoutError";
    } catch (const TimeoutError& e) {
        EXPECT_EQ(e.recovery(), Recovery::RetryCall);
    }
    // A read that cannot get the lock in time reads the database and does not fill.
    EXPECT_EQ(impatient.get(id)->price, 2);
    EXPECT_EQ(impatient.metrics().lock_timeouts, 2u);
    gate.open();
    w.join();
    EXPECT_EQ(db_price(id), 2);
    redis().del({holder->key_of(id)});
}

TEST_F(LockModeTest, AnUpdateFunctionMayReadTheSameKeyUnderItsOwnLock) {
    for (auto mode : {LockMode::Mutex, LockMode::ReadWrite}) {
        auto r = repo(mode);
        const auto id = cleanup_.add(unique_id());
        insert_product(id, 1);
        auto updated = r->update(id, [&](Product& p) {
            auto seen = r->get(id);  // reentrant (Mutex) / write-to-read downgrade (ReadWrite)
            p.price = seen->price + 1;
        });
        EXPECT_EQ(updated->price, 2) << to_string(mode);
        EXPECT_EQ(r->get(id)->price, 2) << to_string(mode);
        redis().del({r->key_of(id)});
    }
}

}  // namespace
}  // namespace lockstep::test
