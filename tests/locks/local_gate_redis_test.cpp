// The local gate through RedisMutex on a real redis-server (docs/locks.md "The local gate"):
// threads of one client queue in the process, so Redis sees one contender per client; deadlines,
// try_lock, close(), NotOwnerError and a failed acquisition keep the gate consistent. Mutual
// exclusion across 2 clients x 8 threads with the gate on is RedisMutexTest.O1_MutualExclusion
// AcrossTwoProcessesOf8Threads (both processes use the default options).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "eventually.h"
#include "locks_test_support.h"
#include "lockstep/core/error.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/locks/lock_errors.h"
#include "lockstep/locks/redis_mutex.h"
#include "test_servers.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::eventually;
using test::LockProcess;

class LocalGateRedisTest : public ::testing::Test {
protected:
    void SetUp() override { prefix_ = test::unique_lock_prefix(); }
    std::string prefix_;
};

// One process, 8 threads, one name: every acquisition finds the Redis lock free (the previous
// holder released it before it left the gate), so each costs exactly one acquire script, and no
// thread ever waits in Redis: no queue entry, no wake-up message.
TEST_F(LocalGateRedisTest, ThreadsOfOneClientNeverQueueInRedis) {
    LockClientOptions o;
    o.claim_refresh = 60s;  // no probe from the gate on a slow machine: every script is counted exactly
    LockProcess p(prefix_, o);
    constexpr int kThreads = 8, kCycles = 25;
    const auto before = p.locks->stats();
    std::atomic<int> inside{0}, overlaps{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; ++t) {
        ts.emplace_back([&] {
            RedisMutex m(*p.locks, "one-process");
            for (int i = 0; i < kCycles; ++i) {
                m.lock();
                if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
                inside.fetch_sub(1);
                m.unlock();
            }
        });
    }
    for (auto& t : ts) t.join();
    const auto after = p.locks->stats();
    EXPECT_EQ(overlaps.load(), 0);
    EXPECT_EQ(after.acquired - before.acquired, static_cast<std::uint64_t>(kThreads * kCycles));
    EXPECT_EQ(after.acquire_attempts - before.acquire_attempts, static_cast<std::uint64_t>(kThreads * kCycles))
        << "one acquire script per acquisition";
    EXPECT_EQ(after.wakeups - before.wakeups, 0u) << "nobody waited in Redis, nobody was woken";
    std::cout << "[ measure  ] " << after.gate_waits - before.gate_waits << " of " << kThreads * kCycles
              << " acquisitions waited at the local gate\n";
}

// Another client holds the lock; 8 threads of this client want it: one of them is in the Redis
// wait queue, 7 wait at the gate. The release wakes that one waiter (one message); the other 7
// then take the free lock with one script each.
TEST_F(LocalGateRedisTest, OnlyOneThreadPerClientJoinsTheRedisQueue) {
    LockClientOptions o;
    o.claim_refresh = 60s;  // no timed re-check while the test looks: every try is counted exactly
    LockProcess p(prefix_, o);
    LockProcess other(prefix_);
    RedisMutex holder(*other.locks, "queued");
    holder.lock();
    const LockKeys keys = p.locks->keys("queued");
    const auto before = p.locks->stats();
    constexpr int kThreads = 8;
    std::atomic<int> acquired{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; ++t) {
        ts.emplace_back([&] {
            RedisMutex m(*p.locks, "queued");
            std::scoped_lock hold(m);
            acquired.fetch_add(1);
        });
    }
    ASSERT_TRUE(eventually([&] { return p.locks->stats().gate_waits - before.gate_waits == kThreads - 1; }));
    ASSERT_TRUE(eventually([&] { return other.redis->command({"ZCARD", keys.mutex_queue()}).integer() == 1; }));
    EXPECT_EQ(p.locks->stats().acquire_attempts - before.acquire_attempts, 2u)
        << "the one representative: a plain try and a queuing try; the others sent nothing";
    EXPECT_EQ(acquired.load(), 0);
    holder.unlock();
    for (auto& t : ts) t.join();
    const auto after = p.locks->stats();
    EXPECT_EQ(acquired.load(), kThreads);
    EXPECT_EQ(after.wakeups - before.wakeups, 1u) << "one Redis waiter, one wake-up";
    EXPECT_EQ(after.acquire_attempts - before.acquire_attempts, static_cast<std::uint64_t>(2 + 1 + (kThreads - 1)));
    EXPECT_EQ(other.redis->command({"ZCARD", keys.mutex_queue()}).integer(), 0);
}

// try_lock() fails at once while another thread of the client holds the lock (no script sent);
// try_lock_for waits at the gate until its deadline; re-entry by the holder passes by the gate.
TEST_F(LocalGateRedisTest, TryLockAndDeadlinesAtTheGate) {
    LockProcess p(prefix_);
    RedisMutex m(*p.locks, "tries");
    m.lock();
    EXPECT_TRUE(m.try_lock()) << "L6: re-entry does not wait at the gate";
    m.unlock();
    const auto attempts0 = p.locks->stats().acquire_attempts;
    std::async(std::launch::async, [&] {
        RedisMutex other(*p.locks, "tries");
        EXPECT_FALSE(other.try_lock());
        EXPECT_EQ(p.locks->stats().acquire_attempts, attempts0) << "refused at the gate, nothing sent";
        const auto t0 = Clock::now();
        EXPECT_FALSE(other.try_lock_for(150ms));
        EXPECT_GE(Clock::now() - t0, 150ms);
        EXPECT_EQ(p.locks->stats().acquire_attempts, attempts0);
    }).get();
    m.unlock();
    std::async(std::launch::async, [&] {
        RedisMutex other(*p.locks, "tries");
        EXPECT_TRUE(other.try_lock()) << "the gate opened with the unlock";
        other.unlock();
    }).get();
}

// NotOwnerError (L10) from a thread that does not hold the lock does not open the gate for it;
// an acquisition that throws (a connection error while sending its script) leaves the gate.
TEST_F(LocalGateRedisTest, NotOwnerUnlockAndAFailedAcquisitionKeepTheGateRight) {
    LockProcess p(prefix_);
    RedisMutex m(*p.locks, "guarded");
    m.lock();
    std::async(std::launch::async, [&] {
        RedisMutex other(*p.locks, "guarded");
        EXPECT_THROW(other.unlock(), NotOwnerError);
        EXPECT_FALSE(other.try_lock()) << "the holder still has the gate";
    }).get();
    m.unlock();
    {
        auto armed = fault::arm("locks.mutex.before_acquire", [] { throw ConnectionError("injected"); });
        EXPECT_THROW(m.lock(), ConnectionError);
    }
    std::async(std::launch::async, [&] {
        RedisMutex other(*p.locks, "guarded");
        EXPECT_TRUE(other.try_lock()) << "the failed acquisition left the gate";
        other.unlock();
    }).get();
}

// Destroying the client wakes the threads waiting at a gate with LockClientClosedError; the
// holder keeps its (now released and reported) hold until its own unlock, which touches nothing.
TEST_F(LocalGateRedisTest, DestroyingTheClientWakesGateWaiters) {
    auto doomed = std::make_unique<LockProcess>(prefix_);
    RedisMutex m(*doomed->locks, "closing");
    m.lock();
    std::vector<std::future<bool>> waiters;
    for (int i = 0; i < 2; ++i) {
        waiters.push_back(std::async(std::launch::async, [&] {
            try {
                m.lock();
                return false;
            } catch (const LockClientClosedError&) {
                return true;
            }
        }));
    }
    ASSERT_TRUE(eventually([&] { return doomed->locks->stats().gate_waits == 2u; }));
    doomed->locks.reset();
    for (auto& w : waiters) EXPECT_TRUE(w.get()) << "woken with LockClientClosedError";
    m.unlock();  // a no-op on a closed client
    EXPECT_THROW(m.lock(), LockClientClosedError);
}

// The gate's owner holds a lock that Redis no longer gives it (deleted here, as if its lease ran
// out): another thread of the process takes it within claim_refresh, as it would without the
// gate (tests/strategies LockModeTest.ALockLostUnderAReaderIsCountedAndTheKeyDeleted relies on
// it); the old owner's unlock then finds its hold lost and does not open the gate under the new
// owner.
TEST_F(LocalGateRedisTest, AWaiterTakesALockItsLocalOwnerLostWithinClaimRefresh) {
    LockClientOptions o;
    o.claim_refresh = 200ms;
    LockProcess p(prefix_, o);
    RedisMutex m(*p.locks, "lost-under-owner");
    m.lock();
    p.redis->command({"DEL", m.keys().mutex()});
    std::promise<void> release;
    std::atomic<bool> got{false};
    std::thread other([&] {
        RedisMutex mine(*p.locks, "lost-under-owner");
        mine.lock();
        got = true;
        release.get_future().wait();
        mine.unlock();
    });
    EXPECT_TRUE(eventually([&] { return got.load(); }, 10s));
    m.unlock();  // found lost: reported, no throw; must not open the gate under `other`
    EXPECT_EQ(p.locks->stats().unlocks_of_lost_holds, 1u);
    std::async(std::launch::async, [&] {
        RedisMutex third(*p.locks, "lost-under-owner");
        EXPECT_FALSE(third.try_lock()) << "the new owner still has the gate";
    }).get();
    release.set_value();
    other.join();
    EXPECT_TRUE(m.try_lock());
    m.unlock();
}

// With local_gate off every thread goes to Redis on its own (the behaviour before the gate).
TEST_F(LocalGateRedisTest, WithTheGateOffEveryThreadQueuesInRedis) {
    LockClientOptions o;
    o.local_gate = false;
    LockProcess p(prefix_, o);
    LockProcess other(prefix_);
    RedisMutex holder(*other.locks, "ungated");
    holder.lock();
    const LockKeys keys = p.locks->keys("ungated");
    std::vector<std::thread> ts;
    for (int t = 0; t < 3; ++t) {
        ts.emplace_back([&] {
            RedisMutex m(*p.locks, "ungated");
            std::scoped_lock hold(m);
        });
    }
    EXPECT_TRUE(eventually([&] { return other.redis->command({"ZCARD", keys.mutex_queue()}).integer() == 3; }));
    EXPECT_EQ(p.locks->stats().gate_waits, 0u);
    holder.unlock();
    for (auto& t : ts) t.join();
}

}  // namespace
}  // namespace lockstep
