// A lost lock never kills the process and never passes silently. std guards
// over a hold lost to a redis-server restart, and a RedisLockClient destroyed while its locks
// are held and waited on.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "eventually.h"
#include "locks_test_support.h"
#include "lockstep/core/error.h"
#include "lockstep/locks/lock_errors.h"
#include "lockstep/locks/redis_mutex.h"
#include "lockstep/locks/redis_read_write_lock.h"
#include "test_servers.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;
using test::LockProcess;
using Clock = std::chrono::steady_clock;

using test::eventually;

long long ms_since(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

class LostLockTest : public ::testing::Test {
protected:
    void SetUp() override { prefix_ = test::unique_lock_prefix(); }
    std::string prefix_;
};

// Before: the guard's destructor called unlock(), which threw LockLostError from a noexcept
// destructor: std::terminate, SIGABRT, every instance at once. Now the restart is forced at a
// known step (inside the guarded scope, 30 s leases: the watchdog cannot have noticed), the
// guards' unlocks report the loss and return.
TEST_F(LostLockTest, RedisRestartInsideStdGuardsIsReportedNotFatal) {
    LOCKSTEP_REQUIRE_OWNED_REDIS();
    std::atomic<int> reported{0};
    LockClientOptions o;
    o.on_lost = [&](const LockLoss& l) {
        EXPECT_EQ(l.reason, LockLossReason::FoundGone) << l.message;
        reported.fetch_add(1);
    };
    LockProcess c(prefix_, o);
    RedisMutex m(*c.locks, "restart-scoped");
    RedisReadWriteLock w(*c.locks, "restart-unique");
    RedisReadWriteLock r(*c.locks, "restart-shared");
    const auto before = c.locks->stats();
    {
        std::scoped_lock hold(m);
        std::unique_lock write(w);
        std::shared_lock read(r);
        test::servers().restart_redis();  // no persistence: every hold is gone
    }  // three unlocks of lost holds: reported, not thrown
    const auto after = c.locks->stats();
    const auto losses = after.losses - before.losses;
    const auto errors = after.unlock_errors - before.unlock_errors;
    std::cout << "[ measure  ] after the restart: " << losses << " loss(es) reported, " << errors
              << " release error(s), process alive\n";
    EXPECT_EQ(losses + errors, 3u) << "every hold is accounted for";
    EXPECT_EQ(static_cast<std::uint64_t>(reported.load()), losses) << "each loss reported once through on_lost";
    EXPECT_EQ(c.locks->tracked_holds(), 0u);
    EXPECT_FALSE(m.held_by_this_thread());
    // The name works again, with a fresh hold.
    ASSERT_TRUE(m.try_lock_for(2s));
    m.unlock();
}

TEST_F(LostLockTest, CheckedUnlockThrowsForCallersWhoWantIt) {
    LockProcess c(prefix_);
    RedisMutex m(*c.locks, "checked");
    {
        std::unique_lock hold(m);
        c.redis->del({m.keys().mutex()});
        EXPECT_THROW(m.unlock_checked(), LockLostError);
    }  // the guard's own unlock() afterwards is absorbed
    EXPECT_EQ(c.locks->tracked_holds(), 0u);
}

// Before: a later unlock ran on a destroyed client (std::bad_alloc, abort) and a waiter hung for
// ever. Now the destruction releases the holds (others need not wait for the leases), reports
// them (ClientClosed), wakes the waiters with LockClientClosedError, and a guard's unlock after
// all that, even after the RedisClient itself is gone, touches nothing.
TEST_F(LostLockTest, DestroyingTheClientWakesWaitersAndReleasesHolds) {
    std::atomic<int> closed_reports{0};
    LockClientOptions o;
    o.on_lost = [&](const LockLoss& l) {
        if (l.reason == LockLossReason::ClientClosed) closed_reports.fetch_add(1);
    };
    // The mutex waiter below is a thread of the holder's own client: this test is about a waiter
    // in the Redis queue, so the local gate (which would keep it in the process) is off. Gate
    // waiters woken by the destruction: LocalGateRedisTest.DestroyingTheClientWakesGateWaiters.
    o.local_gate = false;
    auto doomed = std::make_unique<LockProcess>(prefix_, o);
    LockProcess observer(prefix_);
    RedisMutex m(*doomed->locks, "doomed-mutex");
    RedisReadWriteLock rw(*doomed->locks, "doomed-rw");
    const std::string mutex_key = m.keys().mutex();
    const std::string writer_key = rw.keys().rw_writer();

    std::atomic<bool> holding{false}, leave{false}, lost_seen{false};
    std::thread holder([&] {
        std::scoped_lock hold(m);
        std::unique_lock write(rw);
        holding = true;
        while (!leave.load()) std::this_thread::sleep_for(5ms);
        lost_seen = m.lost() && rw.lost();
        // The guards unlock here, after the client and its RedisClient are gone.
    });
    ASSERT_TRUE(eventually([&] { return holding.load(); }, 5s));

    std::atomic<int> closed_errors{0};
    std::vector<std::thread> waiters;
    waiters.emplace_back([&] {
        try {
            m.lock();
            ADD_FAILURE() << "a waiter got the mutex";
        } catch (const LockClientClosedError&) {
            closed_errors.fetch_add(1);
        }
    });
    waiters.emplace_back([&] {
        try {
            rw.lock_shared();
            ADD_FAILURE() << "a waiter got the read side";
        } catch (const LockClientClosedError&) {
            closed_errors.fetch_add(1);
        }
    });
    ASSERT_TRUE(eventually(
        [&] {
            return observer.redis->command({"ZCARD", m.keys().mutex_queue()}).integer() == 1 &&
                   observer.redis->command({"ZCARD", rw.keys().rw_reader_claims()}).integer() == 1;
        },
        5s))
        << "both waiters should be waiting";

    const auto t0 = Clock::now();
    doomed->locks.reset();  // destroyed while held and waited on
    const long long destroy_ms = ms_since(t0);
    for (auto& t : waiters) t.join();
    const long long woken_ms = ms_since(t0);
    doomed->redis.reset();  // and the RedisClient too: nothing may touch it any more

    EXPECT_EQ(closed_errors.load(), 2) << "waiters wake with LockClientClosedError";
    EXPECT_EQ(closed_reports.load(), 2) << "both holds reported lost (ClientClosed)";
    // One EXISTS per key: the two locks' keys carry different hash tags (another slot on a cluster).
    EXPECT_EQ(observer.redis->command({"EXISTS", mutex_key}).integer(), 0) << "mutex hold released";
    EXPECT_EQ(observer.redis->command({"EXISTS", writer_key}).integer(), 0) << "write hold released";
    std::cout << "[ measure  ] client destroyed in " << destroy_ms << " ms, waiters out after " << woken_ms
              << " ms\n";
    EXPECT_LE(woken_ms, 2000);

    leave = true;
    holder.join();  // the guards' unlocks: no throw, no crash
    EXPECT_TRUE(lost_seen.load());
    EXPECT_THROW(m.lock(), LockClientClosedError);
    EXPECT_THROW(rw.try_lock_shared(), LockClientClosedError);
}

TEST_F(LostLockTest, CheckedUnlockAfterTheClientIsGoneThrowsLockLost) {
    auto doomed = std::make_unique<LockProcess>(prefix_);
    RedisMutex m(*doomed->locks, "doomed-checked");
    m.lock();
    doomed->locks.reset();
    EXPECT_TRUE(m.lost());
    EXPECT_THROW(m.unlock_checked(), LockLostError);
    m.unlock();  // absorbed once, as after any LockLostError
    EXPECT_THROW(m.unlock(), NotOwnerError);
}

}  // namespace
}  // namespace lockstep
