// Writes from outside the library onto lock keys and channels (B5, B6), and a
// frozen waiter at the head of the queue.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <thread>
#include <vector>

#include "eventually.h"
#include "locks_test_support.h"
#include "lockstep/core/error.h"
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

class OutsideWritesTest : public ::testing::Test {
protected:
    void SetUp() override {
        prefix_ = test::unique_lock_prefix();
        a_ = std::make_unique<LockProcess>(prefix_);
        b_ = std::make_unique<LockProcess>(prefix_);
    }
    std::string prefix_;
    std::unique_ptr<LockProcess> a_, b_;
};

// B5: before, a message without ':' on a mutex waiters' channel woke every waiter of that
// process (each re-ran its acquire script). Mutex releases always name one waiter of the
// client; malformed or foreign messages now wake nobody, on the rw channel too.
TEST_F(OutsideWritesTest, B5_MalformedMessagesOnWaitChannelsWakeNobody) {
    // 3 mutex waiters of client a must all sleep in the Redis queue (on a's wait channel), so
    // the local gate, which would keep 2 of them in the process, is off for a.
    LockClientOptions ungated;
    ungated.local_gate = false;
    a_ = std::make_unique<LockProcess>(prefix_, ungated);
    RedisMutex held(*b_->locks, "b5", {.lease = 30000ms});
    RedisReadWriteLock held_rw(*b_->locks, "b5rw", {.lease = 30000ms});
    ASSERT_TRUE(held.try_lock());
    ASSERT_TRUE(held_rw.try_lock());
    std::atomic<int> done{0};
    std::vector<std::thread> waiters;
    for (int i = 0; i < 3; ++i) {
        waiters.emplace_back([&] {
            RedisMutex m(*a_->locks, "b5", {.lease = 30000ms});
            if (m.try_lock_for(20s)) m.unlock();
            done.fetch_add(1);
        });
        waiters.emplace_back([&] {
            RedisReadWriteLock rw(*a_->locks, "b5rw", {.lease = 30000ms});
            if (rw.try_lock_shared_for(20s)) rw.unlock_shared();
            done.fetch_add(1);
        });
    }
    ASSERT_TRUE(eventually(
        [&] {
            return a_->redis->command({"ZCARD", held.keys().mutex_queue()}).integer() == 3 &&
                   a_->redis->command({"ZCARD", held_rw.keys().rw_reader_claims()}).integer() == 3;
        },
        5s));
    std::this_thread::sleep_for(50ms);  // every waiter asleep
    const auto before = a_->locks->stats();
    const std::string mutex_channel = held.keys().mutex_channel(a_->locks->id());
    int delivered = 0;
    for (const char* junk : {"nocolon", "", "x:y", "someone-else:w1", "r:", "rw"}) {
        delivered += static_cast<int>(a_->redis->command({"SPUBLISH", mutex_channel, junk}).integer());
        delivered += static_cast<int>(a_->redis->command({"SPUBLISH", held_rw.keys().rw_channel(), junk}).integer());
    }
    ASSERT_GT(delivered, 0) << "the messages must reach the client";
    std::this_thread::sleep_for(300ms);
    const auto after = a_->locks->stats();
    std::cout << "[ measure  ] " << delivered << " foreign message(s) delivered: "
              << after.wakeups - before.wakeups << " wake-up(s), " << after.acquire_attempts - before.acquire_attempts
              << " acquire attempt(s)\n";
    EXPECT_EQ(after.wakeups, before.wakeups);
    EXPECT_EQ(after.acquire_attempts, before.acquire_attempts);
    held.unlock();
    held_rw.unlock();
    for (auto& t : waiters) t.join();
    EXPECT_EQ(done.load(), 6);
}

// B6: an outside HSET onto a free lock created a lock hash without TTL that blocked the name
// for ever. A lock hash without TTL is foreign: the next acquire gives it one lease.
TEST_F(OutsideWritesTest, B6_ForeignLockHashWithoutTtlExpiresAfterOneLease) {
    RedisMutex m(*a_->locks, "b6", {.lease = 400ms});
    RedisReadWriteLock rw(*a_->locks, "b6rw", {.lease = 400ms});
    a_->redis->command({"HSET", m.keys().mutex(), "intruder", "1"});
    a_->redis->command({"HSET", rw.keys().rw_writer(), "intruder", "1"});
    const auto t0 = Clock::now();
    ASSERT_TRUE(m.try_lock_for(3s)) << "the foreign hash blocks the mutex for ever (B6)";
    const long long mutex_ms = ms_since(t0);
    m.unlock();
    const auto t1 = Clock::now();
    ASSERT_TRUE(rw.try_lock_shared_for(3s)) << "the foreign writer hash blocks readers for ever (B6)";
    const long long rw_ms = ms_since(t1);
    rw.unlock_shared();
    std::cout << "[ measure  ] foreign TTL-less hash: mutex taken after " << mutex_ms << " ms, read side after "
              << rw_ms << " ms (lease 400 ms)\n";
    EXPECT_LE(mutex_ms, 400 + 600);
    EXPECT_LE(rw_ms, 400 + 600);
}

// The frozen head waiter: a waiter SIGSTOPped at the head of the queue is the one a release
// wakes (its subscriber connection still counts as listening). The next waiter re-checks at the
// latest after claim_refresh (2 s), so a free lock stays untaken at most that long. Before, it
// slept for the TTL it last saw: up to the whole lease (30 s here).
TEST_F(OutsideWritesTest, FrozenHeadWaiterDelaysAFreeLockAtMostClaimRefresh) {
    RedisMutex holder(*a_->locks, "frozen", {.lease = 30000ms});
    ASSERT_TRUE(holder.try_lock());
    test::Child head("hold", {{"PREFIX", prefix_}, {"NAME", "frozen"}, {"MODE", "mutex"}});
    ASSERT_TRUE(eventually([&] { return a_->redis->command({"ZCARD", holder.keys().mutex_queue()}).integer() == 1; },
                           10s))
        << "the child never queued";
    head.signal(SIGSTOP);
    std::atomic<long long> got_at{-1};
    const auto base = Clock::now();
    std::thread second([&] {
        RedisMutex m(*b_->locks, "frozen", {.lease = 30000ms});
        if (m.try_lock_for(40s)) {
            got_at = ms_since(base);
            m.unlock();
        }
    });
    ASSERT_TRUE(eventually([&] { return a_->redis->command({"ZCARD", holder.keys().mutex_queue()}).integer() == 2; },
                           5s));
    std::this_thread::sleep_for(100ms);
    const long long released_at = ms_since(base);
    holder.unlock();  // wakes the frozen head
    second.join();
    head.signal(SIGCONT);
    ASSERT_GE(got_at.load(), 0);
    const long long untaken = got_at.load() - released_at;
    std::cout << "[ measure  ] free lock untaken for " << untaken
              << " ms behind a SIGSTOPped head waiter (claim_refresh 2000 ms, lease 30000 ms)\n";
    EXPECT_LE(untaken, 2000 + 1000);
}

}  // namespace
}  // namespace lockstep
