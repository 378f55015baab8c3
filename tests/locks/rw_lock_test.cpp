// RedisReadWriteLock against a real redis-server.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "eventually.h"
#include "locks_test_support.h"
#include "redis_hold_owner.h"
#include "lockstep/core/error.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/locks/redis_read_write_lock.h"
#include "test_servers.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;
using test::LockProcess;
using Clock = std::chrono::steady_clock;

class RedisReadWriteLockTest : public ::testing::Test {
protected:
    void SetUp() override {
        prefix_ = test::unique_lock_prefix();
        a_ = std::make_unique<LockProcess>(prefix_);
        b_ = std::make_unique<LockProcess>(prefix_);
    }
    std::string prefix_;
    std::unique_ptr<LockProcess> a_, b_;
};

TEST_F(RedisReadWriteLockTest, WorksWithStdSharedLockAndUniqueLock) {
    RedisReadWriteLock rw(*a_->locks, "std");
    {
        std::shared_lock read(rw);
        EXPECT_EQ(rw.read_hold_count(), 1);
    }
    {
        std::shared_lock read(rw, 100ms);
        EXPECT_TRUE(read.owns_lock());
    }
    {
        std::unique_lock write(rw);
        EXPECT_EQ(rw.write_hold_count(), 1);
        EXPECT_GT(rw.fence_token(), 0);
    }
    EXPECT_EQ(a_->locks->tracked_holds(), 0u);
}

TEST_F(RedisReadWriteLockTest, ReadersOverlap) {
    std::atomic<int> inside{0}, max_inside{0};
    std::vector<std::thread> readers;
    for (int i = 0; i < 6; ++i) {
        readers.emplace_back([&, i] {
            RedisReadWriteLock rw(i % 2 ? *a_->locks : *b_->locks, "overlap");
            for (int round = 0; round < 3; ++round) {
                std::shared_lock read(rw);
                int now = inside.fetch_add(1) + 1;
                int seen = max_inside.load();
                while (now > seen && !max_inside.compare_exchange_weak(seen, now)) {
                }
                std::this_thread::sleep_for(100ms);
                inside.fetch_sub(1);
            }
        });
    }
    for (auto& t : readers) t.join();
    std::cout << "[ measure  ] max concurrent readers: " << max_inside.load() << " of 6\n";
    EXPECT_GT(max_inside.load(), 1);
}

TEST_F(RedisReadWriteLockTest, WriterIsExclusive) {
    std::atomic<int> readers{0}, writers{0}, violations{0}, writes{0}, reads{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> ts;
    for (int i = 0; i < 6; ++i) {
        const bool writer = i < 2;
        ts.emplace_back([&, i, writer] {
            RedisReadWriteLock rw(i % 2 ? *a_->locks : *b_->locks, "exclusive");
            while (!stop.load()) {
                if (writer) {
                    std::unique_lock w(rw);
                    if (writers.fetch_add(1) != 0 || readers.load() != 0) violations.fetch_add(1);
                    std::this_thread::sleep_for(3ms);
                    if (readers.load() != 0) violations.fetch_add(1);
                    writers.fetch_sub(1);
                    writes.fetch_add(1);
                } else {
                    std::shared_lock r(rw);
                    readers.fetch_add(1);
                    if (writers.load() != 0) violations.fetch_add(1);
                    std::this_thread::sleep_for(2ms);
                    if (writers.load() != 0) violations.fetch_add(1);
                    readers.fetch_sub(1);
                    reads.fetch_add(1);
                }
            }
        });
    }
    std::this_thread::sleep_for(2s);
    stop = true;
    for (auto& t : ts) t.join();
    std::cout << "[ measure  ] " << writes.load() << " writes, " << reads.load() << " reads in 2 s\n";
    EXPECT_EQ(violations.load(), 0);
    EXPECT_GT(writes.load(), 0);
    EXPECT_GT(reads.load(), 0);
}

TEST_F(RedisReadWriteLockTest, WriterIsNotStarvedByContinuousReaders) {
    // Four readers overlap so that some reader holds the lock at every moment.
    std::atomic<bool> stop{false};
    std::atomic<int> reads{0};
    std::vector<std::thread> readers;
    for (int i = 0; i < 4; ++i) {
        readers.emplace_back([&, i] {
            RedisReadWriteLock rw(i % 2 ? *a_->locks : *b_->locks, "starve");
            std::this_thread::sleep_for(std::chrono::milliseconds(10 * i));
            while (!stop.load()) {
                if (rw.try_lock_shared_for(50ms)) {
                    std::this_thread::sleep_for(40ms);
                    rw.unlock_shared();
                    reads.fetch_add(1);
                }
            }
        });
    }
    std::this_thread::sleep_for(300ms);
    RedisReadWriteLock writer(*a_->locks, "starve");
    const auto t0 = Clock::now();
    const bool got = writer.try_lock_for(5s);
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
    if (got) writer.unlock();
    stop = true;
    for (auto& t : readers) t.join();
    std::cout << "[ measure  ] writer waited " << waited << " ms among " << reads.load() << " reads\n";
    EXPECT_TRUE(got);
    EXPECT_LT(waited, 1000);
}

TEST_F(RedisReadWriteLockTest, ReadersAreNotStarvedByContinuousWriters) {
    // Two writers take turns back to back; a reader still gets in, soon.
    std::atomic<bool> stop{false};
    std::atomic<int> writes{0};
    std::vector<std::thread> writers;
    for (int i = 0; i < 2; ++i) {
        writers.emplace_back([&, i] {
            RedisReadWriteLock rw(i % 2 ? *a_->locks : *b_->locks, "readerstarve");
            while (!stop.load()) {
                std::unique_lock w(rw);
                std::this_thread::sleep_for(20ms);
                writes.fetch_add(1);
            }
        });
    }
    std::this_thread::sleep_for(200ms);
    RedisReadWriteLock reader(*a_->locks, "readerstarve");
    const auto t0 = Clock::now();
    const bool got = reader.try_lock_shared_for(5s);
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
    if (got) reader.unlock_shared();
    stop = true;
    for (auto& t : writers) t.join();
    std::cout << "[ measure  ] reader waited " << waited << " ms among " << writes.load() << " writes\n";
    EXPECT_TRUE(got);
    EXPECT_LT(waited, 500);
}

TEST_F(RedisReadWriteLockTest, UpgradeIsRefusedNotDeadlocked) {
    RedisReadWriteLock rw(*a_->locks, "upgrade");
    rw.lock_shared();
    const auto t0 = Clock::now();
    EXPECT_THROW(rw.lock(), LockUpgradeError);
    EXPECT_THROW(rw.try_lock(), LockUpgradeError);
    EXPECT_THROW(rw.try_lock_for(1s), LockUpgradeError);
    EXPECT_LT(Clock::now() - t0, 200ms);
    rw.unlock_shared();
    // Once the read side is released the write side is available.
    EXPECT_TRUE(rw.try_lock());
    rw.unlock();
}

TEST_F(RedisReadWriteLockTest, DowngradeIsAllowed) {
    RedisReadWriteLock rw(*a_->locks, "downgrade");
    RedisReadWriteLock other(*b_->locks, "downgrade");
    rw.lock();
    const FenceToken t = rw.fence_token();
    EXPECT_GT(t, 0);
    rw.lock_shared();  // downgrade step 1: read while writing
    std::thread([&] { EXPECT_FALSE(other.try_lock_shared()); }).join();
    rw.unlock();  // step 2: keep only the read side
    std::thread([&] {
        EXPECT_TRUE(other.try_lock_shared());  // readers together now
        other.unlock_shared();
        EXPECT_FALSE(other.try_lock());  // still no writer
    }).join();
    rw.unlock_shared();
    std::thread([&] {
        EXPECT_TRUE(other.try_lock());
        EXPECT_GT(other.fence_token(), t);
        other.unlock();
    }).join();
}

TEST_F(RedisReadWriteLockTest, L3_UnlockByNonHolderIsRefused) {
    RedisReadWriteLock rw(*a_->locks, "l3");
    rw.lock_shared();
    std::thread([&] {
        EXPECT_THROW(rw.unlock_shared(), NotOwnerError);
        EXPECT_THROW(rw.unlock(), NotOwnerError);
    }).join();
    EXPECT_THROW(rw.unlock(), NotOwnerError);  // holds the read side, not the write side
    rw.unlock_shared();
}

TEST_F(RedisReadWriteLockTest, L6_BothSidesAreReentrant) {
    RedisReadWriteLock rw(*a_->locks, "l6");
    rw.lock_shared();
    rw.lock_shared();
    EXPECT_EQ(rw.read_hold_count(), 2);
    rw.unlock_shared();
    rw.unlock_shared();
    rw.lock();
    rw.lock();
    EXPECT_EQ(rw.write_hold_count(), 2);
    rw.unlock();
    rw.unlock();
    EXPECT_EQ(a_->locks->tracked_holds(), 0u);
}

TEST_F(RedisReadWriteLockTest, ReaderReentryIsNotBlockedByAWaitingWriter) {
    RedisReadWriteLock rw(*a_->locks, "reentry");
    RedisReadWriteLock writer(*b_->locks, "reentry");
    rw.lock_shared();
    std::thread w([&] {
        EXPECT_TRUE(writer.try_lock_for(3s));
        writer.unlock();
    });
    // The writer waits and has claimed its turn (checked, not assumed after a sleep: on a slow
    // machine the claim may come late, and the two checks below would then prove nothing).
    const auto t0 = Clock::now();
    while (a_->redis->command({"ZCARD", rw.keys().rw_writer_claims()}).integer() == 0 &&
           Clock::now() - t0 < 5s) {
        std::this_thread::sleep_for(5ms);
    }
    ASSERT_EQ(a_->redis->command({"ZCARD", rw.keys().rw_writer_claims()}).integer(), 1);
    RedisReadWriteLock fresh(*a_->locks, "reentry");
    std::thread([&] {
        EXPECT_FALSE(fresh.try_lock_shared()) << "new readers wait behind the writer";
    }).join();
    EXPECT_TRUE(rw.try_lock_shared()) << "a reader re-entering must not deadlock against the writer";
    rw.unlock_shared();
    rw.unlock_shared();
    w.join();
}

TEST_F(RedisReadWriteLockTest, L5_DeadReaderBlocksWritersAtMostItsLease) {
    test::Child child("hold", {{"PREFIX", prefix_},
                               {"NAME", "deadreader"},
                               {"MODE", "read"},
                               {"LEASE_MS", "1500"},
                               {"RENEW", "1"}});
    ASSERT_TRUE(child.expect("HELD", 10s));
    RedisReadWriteLock live_reader(*a_->locks, "deadreader", {.lease = 30000ms});
    live_reader.lock_shared();  // another reader that stays alive (its own, longer lease)
    std::this_thread::sleep_for(600ms);
    child.signal(SIGKILL);
    const auto killed = Clock::now();
    child.wait();
    live_reader.unlock_shared();
    RedisReadWriteLock writer(*b_->locks, "deadreader");
    ASSERT_TRUE(writer.try_lock_for(10s));
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - killed).count();
    std::cout << "[ measure  ] writer in " << waited << " ms after the reader was killed (lease 1500 ms)\n";
    EXPECT_LE(waited, 1500 + 1000);
    writer.unlock();
}

TEST_F(RedisReadWriteLockTest, DeadWaitingWriterStopsBlockingReadersSoon) {
    // A writer waits behind a reader (its claim keeps new readers out), then dies. Its claim
    // expires within claim_refresh + waiter_grace (2 s + 1 s by default), and readers go on.
    RedisReadWriteLock reader(*a_->locks, "deadwriter");
    reader.lock_shared();
    test::Child child("hold", {{"PREFIX", prefix_}, {"NAME", "deadwriter"}, {"MODE", "write"}});
    const std::string claims = reader.keys().rw_writer_claims();
    const auto t0 = Clock::now();
    while (a_->redis->command({"ZCARD", claims}).integer() == 0 && Clock::now() - t0 < 10s) {
        std::this_thread::sleep_for(10ms);
    }
    ASSERT_EQ(a_->redis->command({"ZCARD", claims}).integer(), 1) << "the child writer never waited";
    RedisReadWriteLock newcomer(*b_->locks, "deadwriter");
    std::thread([&] {
        EXPECT_FALSE(newcomer.try_lock_shared()) << "a waiting writer keeps new readers out";
    }).join();
    child.signal(SIGKILL);
    const auto killed = Clock::now();
    child.wait();
    std::thread([&] {
        EXPECT_TRUE(newcomer.try_lock_shared_for(10s));
        newcomer.unlock_shared();
    }).join();
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - killed).count();
    std::cout << "[ measure  ] new reader in " << waited << " ms after the waiting writer died\n";
    EXPECT_LE(waited, 2000 + 1000 + 1500);  // claim expiry, plus slack for a loaded CI machine
    reader.unlock_shared();
}

TEST_F(RedisReadWriteLockTest, L5_StaleRenewalOfAnEarlierReadHoldCannotCutTheNextOne) {
    // As RedisMutexTest.L5_StaleRenewalOfAnEarlierHoldCannotCutTheSameThreadsNextHold, for a
    // reader: the renewal of a 600 ms read hold is in flight when the thread unlocks it and
    // reads again with a 30 s lease. The stale renewal must not set the reader's own lease back
    // to 600 ms, or a writer would get in while the reader still reads.
    RedisReadWriteLock short_lease(*a_->locks, "stale", {.lease = 600ms});
    RedisReadWriteLock long_lease(*a_->locks, "stale", {.lease = 30000ms});
    RedisReadWriteLock writer(*b_->locks, "stale");
    fault::Gate gate;
    std::atomic<int> renewed{0};
    auto before = fault::arm("locks.watchdog.before_renew", gate.action(), {.times = 1});
    auto after = fault::arm("locks.watchdog.after_renew", [&] { renewed.fetch_add(1); });
    short_lease.lock_shared();
    ASSERT_TRUE(gate.wait_arrivals(1, 3s));
    short_lease.unlock_shared();
    long_lease.lock_shared();
    gate.open();
    ASSERT_TRUE(test::eventually([&] { return renewed.load() != 0; }, 3s));
    ASSERT_EQ(renewed.load(), 1);
    const auto now = a_->redis->command({"TIME"});
    const long long now_ms =
        std::stoll(now.elements()[0].str()) * 1000 + std::stoll(now.elements()[1].str()) / 1000;
    const auto expiry = a_->redis->command(
        {"ZSCORE", long_lease.keys().rw_reader_expiry(),
         test::hold_owner_in(*a_->redis, long_lease.keys().rw_reader_expiry(), a_->locks->owner_of_this_thread(), true)});
    ASSERT_FALSE(expiry.is_nil());
    EXPECT_GT(std::stod(expiry.str()) - static_cast<double>(now_ms), 25000.0)
        << "a stale renewal cut the reader's 30 s lease";
    std::this_thread::sleep_for(700ms);      // past the old 600 ms lease
    const bool writing = writer.try_lock();  // another client: another owner, even in this thread
    EXPECT_FALSE(writing) << "a writer got in while a reader reads";
    if (writing) writer.unlock();
    EXPECT_FALSE(long_lease.lost());
    EXPECT_NO_THROW(long_lease.unlock_shared());
}

TEST_F(RedisReadWriteLockTest, L5_LostReadHoldIsReported) {
    // Reported by the watchdog's renewal (reason Expired), not merely inferred from the lease.
    std::atomic<int> expired{0};
    RedisReadWriteLock rw(*a_->locks, "lostread", {.lease = 600ms, .on_lost = [&](const LockLoss& l) {
                                                       if (l.reason == LockLossReason::Expired)
                                                           expired.fetch_add(1);
                                                   }});
    rw.lock_shared();
    a_->redis->del({rw.keys().rw_readers(), rw.keys().rw_reader_expiry()});
    EXPECT_TRUE(test::eventually([&] { return expired.load() != 0; }, 3s));
    EXPECT_EQ(expired.load(), 1);
    EXPECT_TRUE(rw.lost());
    EXPECT_THROW(rw.unlock_shared_checked(), LockLostError);
}

}  // namespace
}  // namespace lockstep

namespace lockstep {
namespace {

// B1: a waiting writer W1 is SIGKILLed and its claim's expiry entry is deleted from
// outside (eviction did the same in 2 of 10 adversary trials). Before the fix the orphaned claim
// was never removed: W2 was told "re-check now" for ever (~300-400 EVALSHA/s) and never got the
// lock. Now a claim without an expiry entry counts as expired: W2 gets the lock as soon as the
// holder releases, and it re-checks rarely while it waits.
TEST_F(RedisReadWriteLockTest, B1_ClaimWithoutExpiryEntryCountsAsExpired) {
    RedisReadWriteLock holder(*a_->locks, "b1");
    holder.lock();
    const std::string claims = holder.keys().rw_writer_claims();
    test::Child w1("hold", {{"PREFIX", prefix_}, {"NAME", "b1"}, {"MODE", "write"}});
    const auto t0 = Clock::now();
    while (a_->redis->command({"ZCARD", claims}).integer() < 1 && Clock::now() - t0 < 10s) {
        std::this_thread::sleep_for(5ms);
    }
    ASSERT_EQ(a_->redis->command({"ZCARD", claims}).integer(), 1) << "W1 never waited";

    std::atomic<long long> acquired_at_ms{-1};
    std::atomic<bool> got{false};
    const auto base = Clock::now();
    std::thread w2([&] {
        RedisReadWriteLock rw(*b_->locks, "b1");
        if (rw.try_lock_for(8s)) {
            acquired_at_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - base).count();
            got = true;
            rw.unlock();
        }
    });
    while (a_->redis->command({"ZCARD", claims}).integer() < 2 && Clock::now() - t0 < 10s) {
        std::this_thread::sleep_for(5ms);
    }
    ASSERT_EQ(a_->redis->command({"ZCARD", claims}).integer(), 2) << "W2 never waited";

    w1.signal(SIGKILL);
    w1.wait();
    a_->redis->del({holder.keys().rw_claim_expiry()});  // the orphan: a claim with no expiry entry
    const auto attempts_before = b_->locks->stats().acquire_attempts;
    const long long released_at_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - base).count();
    holder.unlock();
    w2.join();
    const auto attempts = b_->locks->stats().acquire_attempts - attempts_before;
    ASSERT_TRUE(got.load()) << "W2 never acquired: the orphaned claim blocks the name (B1); it made "
                            << attempts << " acquire attempts";
    const long long waited = acquired_at_ms.load() - released_at_ms;
    std::cout << "[ measure  ] W2 acquired " << waited << " ms after the release, " << attempts
              << " acquire attempt(s) after the orphan was made\n";
    EXPECT_LE(waited, 2000);
    EXPECT_LE(attempts, 10u) << "a waiter must not busy-loop";
}

// B1 audit, readers: a reader field whose lease entry vanished (rx evicted or deleted) counts as
// gone, so it cannot keep writers out for ever (before: writers re-checked every lease while
// the hash lived).
TEST_F(RedisReadWriteLockTest, B1_ReaderWithoutLeaseEntryDoesNotBlockWriters) {
    RedisReadWriteLock reader(*a_->locks, "b1r", {.lease = 30000ms});
    reader.lock_shared();
    a_->redis->del({reader.keys().rw_reader_expiry()});
    RedisReadWriteLock writer(*b_->locks, "b1r");
    const auto t0 = Clock::now();
    bool got = false;
    std::thread([&] {
        got = writer.try_lock_for(3s);
        if (got) writer.unlock();
    }).join();
    EXPECT_TRUE(got);
    EXPECT_LE(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count(), 1000);
    EXPECT_NO_THROW(reader.unlock_shared());  // the read hold was lost with its lease: reported
}

}  // namespace
}  // namespace lockstep
