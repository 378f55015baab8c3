// RedisMutex against a real redis-server. Test names carry the docs/races.md id they show closed.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "../../locks/redis/src/lock_scripts.h"  // to drive the release script as a foreign client would
#include "eventually.h"
#include "locks_test_support.h"
#include "lockstep/core/error.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/locks/redis_mutex.h"
#include "test_servers.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;
using test::LockProcess;
using Clock = std::chrono::steady_clock;

long long ms_since(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

using test::eventually;

// Counts arrivals at a fault point without blocking.
struct Arrivals {
    std::mutex m;
    std::condition_variable cv;
    int n = 0;
    fault::Action action() {
        return [this] {
            std::lock_guard l(m);
            ++n;
            cv.notify_all();
        };
    }
    bool wait_for(int count, std::chrono::milliseconds timeout) {
        std::unique_lock l(m);
        return cv.wait_for(l, timeout, [&] { return n >= count; });
    }
    int get() {
        std::lock_guard l(m);
        return n;
    }
};

class RedisMutexTest : public ::testing::Test {
protected:
    void SetUp() override {
        prefix_ = test::unique_lock_prefix();
        a_ = std::make_unique<LockProcess>(prefix_);
        b_ = std::make_unique<LockProcess>(prefix_);
    }
    std::string owner_field(RedisClient& redis, const LockKeys& keys) {
        auto r = redis.command({"HKEYS", keys.mutex()});
        return r.elements().empty() ? "" : r.elements()[0].str();
    }
    std::string prefix_;
    std::unique_ptr<LockProcess> a_, b_;  // two "processes": separate clients and connections
};

TEST_F(RedisMutexTest, SatisfiesTimedLockableWithStdGuards) {
    RedisMutex m(*a_->locks, "std");
    {
        std::scoped_lock hold(m);
        EXPECT_TRUE(m.held_by_this_thread());
    }
    {
        std::unique_lock hold(m, 200ms);
        EXPECT_TRUE(hold.owns_lock());
    }
    {
        std::lock_guard hold(m);
        EXPECT_EQ(m.hold_count(), 1);
    }
    EXPECT_TRUE(m.try_lock_until(std::chrono::system_clock::now() + 100ms));
    m.unlock();
    EXPECT_TRUE(m.try_lock_for(std::chrono::hours::max()));  // saturates, no overflow
    m.unlock();
    EXPECT_TRUE(m.try_lock_for(-5s));  // a past deadline still makes one attempt
    m.unlock();
    EXPECT_FALSE(m.held_by_this_thread());
    EXPECT_EQ(a_->locks->tracked_holds(), 0u);
}

TEST_F(RedisMutexTest, NonPositiveClientDurationsAreConfigErrorsNamingTheOption) {
    auto make = [&](auto&& tweak) {
        LockClientOptions o;
        tweak(o);
        RedisLockClient client(*a_->redis, o);
    };
    auto expect_part = [&](auto&& tweak, const std::string& part) {
        try {
            make(tweak);
            ADD_FAILURE() << "no ConfigError for " << part;
        } catch (const ConfigError& e) {
            EXPECT_EQ(e.part(), part);
        }
    };
    expect_part([](LockClientOptions& o) { o.fence_counter_ttl = 0ms; }, "fence_counter_ttl");
    expect_part([](LockClientOptions& o) { o.waiter_grace = -1ms; }, "waiter_grace");
    expect_part([](LockClientOptions& o) { o.claim_refresh = 0ms; }, "claim_refresh");
}

TEST_F(RedisMutexTest, L1_L2_OwnerAndServerSideTtlAreSetInOneStep) {
    RedisMutex m(*a_->locks, "ttl", {.lease = 5000ms});
    // Stop right after the acquire script: the key must already carry owner and TTL.
    long long pttl = -3;
    std::string owner;
    auto armed = fault::arm("locks.mutex.after_acquire", [&] {
        pttl = a_->redis->command({"PTTL", m.keys().mutex()}).integer();
        owner = owner_field(*a_->redis, m.keys());
    });
    m.lock();
    armed.disarm();
    EXPECT_GT(pttl, 4000);
    EXPECT_LE(pttl, 5000);
    EXPECT_EQ(owner.rfind(a_->locks->owner_of_this_thread() + ":", 0), 0u) << owner << ": the thread's owner and a hold number";
    m.unlock();
}

TEST_F(RedisMutexTest, L3_ReleaseByNonOwnerIsRefused) {
    RedisMutex ma(*a_->locks, "l3");
    RedisMutex mb(*b_->locks, "l3");
    ma.lock();
    // Another process's thread, and another thread of the same process: typed error, no effect.
    std::thread([&] { EXPECT_THROW(mb.unlock(), NotOwnerError); }).join();
    std::thread([&] { EXPECT_THROW(ma.unlock(), NotOwnerError); }).join();
    // Even a client that sends the release script with its own owner id changes nothing.
    auto r = b_->redis->eval(lock_scripts::mutex_release(),
                             {ma.keys().mutex(), ma.keys().mutex_queue(), ma.keys().mutex_queue_expiry()},
                             {b_->locks->owner_of_this_thread(), "1"});
    EXPECT_EQ(r.integer(), 0);
    EXPECT_EQ(owner_field(*a_->redis, ma.keys()).rfind(a_->locks->owner_of_this_thread() + ":", 0), 0u);
    std::thread([&] { EXPECT_FALSE(mb.try_lock()); }).join();
    ma.unlock();
    std::thread([&] {
        EXPECT_TRUE(mb.try_lock());
        mb.unlock();
    }).join();
}

TEST_F(RedisMutexTest, L4_OwnerCheckAndDeleteCannotBeSplitByExpiry) {
    // A pauses between deciding to release and the release itself; its lease runs out; B takes
    // the lock; A's release must not delete B's lock.
    RedisMutex ma(*a_->locks, "l4", {.lease = 300ms, .renew = false});
    RedisMutex mb(*b_->locks, "l4");
    ma.lock();
    fault::Gate gate;
    auto armed =
        fault::arm("locks.mutex.before_release", gate.action(), {.only_thread = std::this_thread::get_id()});
    std::thread b([&] {
        ASSERT_TRUE(gate.wait_arrivals(1, 5s));
        ASSERT_TRUE(mb.try_lock_for(2s));  // after A's lease ran out
        gate.open();
        // B keeps holding while A's release runs.
        std::this_thread::sleep_for(300ms);
        EXPECT_TRUE(mb.held_by_this_thread());
        EXPECT_FALSE(mb.lost());
        mb.unlock();  // B's lock was intact
    });
    EXPECT_THROW(ma.unlock_checked(), LockLostError);
    // B still holds it: its owner field is there.
    EXPECT_TRUE(eventually([&] { return !owner_field(*a_->redis, ma.keys()).empty(); }, 1s));
    b.join();
}

TEST_F(RedisMutexTest, L10_UnlockAfterLossThrowsAndNewOwnerKeepsTheLock) {
    std::atomic<int> callbacks{0};
    LockLossReason reason{};
    RedisMutex ma(*a_->locks, "l10", {.lease = 300ms, .renew = false, .on_lost = [&](const LockLoss& l) {
                                          reason = l.reason;
                                          callbacks.fetch_add(1);
                                      }});
    RedisMutex mb(*b_->locks, "l10");
    ma.lock();
    std::this_thread::sleep_for(400ms);
    EXPECT_TRUE(ma.lost());
    EXPECT_TRUE(eventually([&] { return callbacks.load() == 1; }, 1s));
    EXPECT_EQ(reason, LockLossReason::LeaseEnded);
    ASSERT_TRUE(mb.try_lock());  // another client: another owner, even in this thread
    EXPECT_THROW(ma.unlock_checked(), LockLostError);
    EXPECT_EQ(owner_field(*a_->redis, ma.keys()).substr(0, b_->locks->id().size() + 1), b_->locks->id() + ":");
    EXPECT_EQ(callbacks.load(), 1);  // reported once
    // Not holding any more: a further unlock is absorbed once (the guard pattern below), then
    // NotOwnerError.
    ma.unlock();
    EXPECT_THROW(ma.unlock(), NotOwnerError);
    EXPECT_TRUE(mb.held_by_this_thread());
    mb.unlock();
}

TEST_F(RedisMutexTest, L10_UniqueLockCanCatchTheLossWithoutTerminating) {
    RedisMutex m(*a_->locks, "l10guard", {.lease = 200ms, .renew = false});
    {
        std::unique_lock hold(m);
        a_->redis->del({m.keys().mutex()});  // e.g. the server lost it
        EXPECT_THROW(m.unlock_checked(), LockLostError);
    }  // the guard's destructor unlocks again: absorbed, no terminate
    EXPECT_FALSE(m.held_by_this_thread());
}

// The guard path never throws. A hold deleted under a std::scoped_lock is
// reported (on_lost once, lost(), the counters), and the guard's unlock() returns quietly.
TEST_F(RedisMutexTest, L10_ScopedLockOverALostHoldReportsInsteadOfTerminating) {
    std::atomic<int> reported{0};
    RedisMutex m(*a_->locks, "l10scoped", {.on_lost = [&](const LockLoss& l) {
                                              EXPECT_EQ(l.reason, LockLossReason::FoundGone);
                                              reported.fetch_add(1);
                                          }});
    const auto before = a_->locks->stats();
    {
        std::scoped_lock hold(m);
        a_->redis->del({m.keys().mutex()});
    }  // unlock() finds the hold gone: reported, not thrown (std::terminate before)
    EXPECT_EQ(reported.load(), 1);
    EXPECT_FALSE(m.held_by_this_thread());
    const auto after = a_->locks->stats();
    EXPECT_EQ(after.losses - before.losses, 1u);
    EXPECT_EQ(after.unlocks_of_lost_holds - before.unlocks_of_lost_holds, 1u);
    EXPECT_THROW(m.unlock(), NotOwnerError);  // nothing is absorbed: nothing was thrown
}

TEST_F(RedisMutexTest, L6_ReentrantAcrossObjectsOfTheSameName) {
    RedisMutex outer(*a_->locks, "l6");
    RedisMutex inner(*a_->locks, "l6");
    RedisMutex other(*b_->locks, "l6");
    outer.lock();
    const FenceToken t = outer.fence_token();
    ASSERT_TRUE(inner.try_lock());  // same thread: re-entry, not a deadlock
    EXPECT_EQ(inner.hold_count(), 2);
    EXPECT_EQ(inner.fence_token(), t);  // re-entry keeps the token
    auto count = a_->redis->command({"HGET", outer.keys().mutex(), owner_field(*a_->redis, outer.keys())});
    EXPECT_EQ(count.str(), "2");
    inner.unlock();
    std::thread([&] { EXPECT_FALSE(other.try_lock()); }).join();
    outer.unlock();
    std::thread([&] {
        EXPECT_TRUE(other.try_lock());
        other.unlock();
    }).join();
}

TEST_F(RedisMutexTest, L6_ReenteringALostHoldThrows) {
    RedisMutex m(*a_->locks, "l6lost");
    m.lock();
    a_->redis->del({m.keys().mutex()});
    EXPECT_THROW(m.lock(), LockLostError);
    EXPECT_EQ(a_->redis->command({"EXISTS", m.keys().mutex()}).integer(), 0);  // not re-created
    EXPECT_THROW(m.unlock_checked(), LockLostError);
}

TEST_F(RedisMutexTest, L5_RenewalKeepsTheLockAndFindingItGoneReportsLoss) {
    std::atomic<int> lost{0};
    // 1.2 s lease renewed every 400 ms: the watchdog may be up to 800 ms late on a loaded CI
    // machine before the lease could run out.
    RedisMutex m(*a_->locks, "l5renew", {.lease = 1200ms, .on_lost = [&](const LockLoss& l) {
                                             EXPECT_EQ(l.reason, LockLossReason::Expired);
                                             lost.fetch_add(1);
                                         }});
    m.lock();
    // Four renewals (every 400 ms): the hold is then past the lease its acquisition set.
    ASSERT_TRUE(test::eventually_value([&] { return a_->locks->stats().renewals; },
                                       [](std::uint64_t n) { return n >= 4; }));
    EXPECT_FALSE(m.lost());
    EXPECT_GT(a_->redis->command({"PTTL", m.keys().mutex()}).integer(), 0);
    a_->redis->del({m.keys().mutex()});
    ASSERT_TRUE(eventually([&] { return m.lost(); }, 1s));
    // lost() turns true under the registry's lock; on_lost runs just after, on the same thread.
    ASSERT_TRUE(eventually([&] { return lost.load() >= 1; }, 1s));
    std::this_thread::sleep_for(500ms);
    EXPECT_EQ(lost.load(), 1);  // once
    EXPECT_EQ(a_->redis->command({"EXISTS", m.keys().mutex()}).integer(), 0);  // never re-created
    EXPECT_THROW(m.unlock_checked(), LockLostError);
}

TEST_F(RedisMutexTest, L5_RenewalRacingUnlockNeitherRecreatesNorExtends) {
    std::atomic<int> lost{0};
    LockClientOptions o;
    o.on_lost = [&](const LockLoss&) { lost.fetch_add(1); };
    LockProcess c(prefix_, o);
    RedisMutex m(*c.locks, "l5race", {.lease = 900ms});
    RedisMutex mb(*b_->locks, "l5race", {.lease = 30000ms});
    fault::Gate gate;
    Arrivals renewed;
    auto before = fault::arm("locks.watchdog.before_renew", gate.action(), {.times = 1});
    auto after = fault::arm("locks.watchdog.after_renew", renewed.action());
    m.lock();
    // The watchdog has picked the hold for renewal and stops just before sending it.
    ASSERT_TRUE(gate.wait_arrivals(1, 3s));
    m.unlock();
    // Someone else (another client: another owner, even in this thread) takes it, long lease.
    ASSERT_TRUE(mb.try_lock());
    const long long pttl_before = b_->redis->command({"PTTL", m.keys().mutex()}).integer();
    gate.open();  // the stale renewal goes out now
    ASSERT_TRUE(renewed.wait_for(1, 3s));
    // It did not re-create A's hold, nor extend B's lock to A's lease, nor report a loss.
    const std::string owner = owner_field(*b_->redis, m.keys());
    EXPECT_EQ(owner.substr(0, b_->locks->id().size() + 1), b_->locks->id() + ":");
    EXPECT_EQ(b_->redis->command({"HLEN", m.keys().mutex()}).integer(), 1);
    const long long pttl_after = b_->redis->command({"PTTL", m.keys().mutex()}).integer();
    EXPECT_LE(pttl_after, pttl_before);
    EXPECT_GT(pttl_after, 25000) << "B's 30 s lease was cut to A's lease by a stale renewal";
    EXPECT_EQ(lost.load(), 0);
    EXPECT_EQ(c.locks->tracked_holds(), 0u);
    mb.unlock();
}

TEST_F(RedisMutexTest, L5_StaleRenewalOfAnEarlierHoldCannotCutTheSameThreadsNextHold) {
    // The watchdog has picked this thread's 600 ms hold for renewal when the thread unlocks it
    // and locks the same name again with a 30 s lease (another RedisMutex object: same owner).
    // The stale renewal still finds the owner's field. It must not set the new hold's TTL back
    // to 600 ms: the server would drop the new hold long before its first renewal (10 s), another
    // client would take the lock, and lost() would still say the hold is fine.
    RedisMutex short_lease(*a_->locks, "stale", {.lease = 600ms});
    RedisMutex long_lease(*a_->locks, "stale", {.lease = 30000ms});
    RedisMutex other(*b_->locks, "stale");
    fault::Gate gate;
    Arrivals renewed;
    auto before = fault::arm("locks.watchdog.before_renew", gate.action(), {.times = 1});
    auto after = fault::arm("locks.watchdog.after_renew", renewed.action());
    short_lease.lock();
    ASSERT_TRUE(gate.wait_arrivals(1, 3s));  // the 600 ms hold's renewal is about to go out
    short_lease.unlock();
    long_lease.lock();
    gate.open();  // the stale renewal goes out now, for the same owner
    ASSERT_TRUE(renewed.wait_for(1, 3s));
    EXPECT_GT(a_->redis->command({"PTTL", long_lease.keys().mutex()}).integer(), 25000)
        << "a stale renewal cut the new hold's 30 s lease";
    std::this_thread::sleep_for(700ms);    // past the old 600 ms lease
    const bool stolen = other.try_lock();  // another client: another owner, even in this thread
    EXPECT_FALSE(stolen) << "two holders at once";
    if (stolen) other.unlock();
    EXPECT_FALSE(long_lease.lost());
    EXPECT_NO_THROW(long_lease.unlock());
}

TEST_F(RedisMutexTest, L5_LostTurnsTrueWhenTheLeaseRunsOutUnrenewed) {
    // The watchdog stalls (parked before its renewal round trip, as a paused watchdog thread or a
    // renewal stuck on a slow server would be) past the lease. The server drops the hold and
    // another client takes the lock. lost() must not keep saying the hold is fine: the client
    // measured the lease from before the acquire, and nothing has renewed it since.
    RedisMutex m(*a_->locks, "stalled", {.lease = 600ms});
    RedisMutex other(*b_->locks, "stalled");
    fault::Gate gate;
    auto before = fault::arm("locks.watchdog.before_renew", gate.action(), {.times = 1});
    m.lock();
    ASSERT_TRUE(gate.wait_arrivals(1, 3s));  // the renewal is stuck
    ASSERT_TRUE(other.try_lock_for(5s));     // once the server dropped m's hold
    EXPECT_TRUE(m.lost()) << "another client holds the lock while lost() says held";
    gate.open();  // the renewal finds the hold gone: reported, not re-created
    EXPECT_TRUE(eventually([&] { return a_->locks->stats().losses == 1; }, 3s));
    EXPECT_TRUE(m.lost());
    other.unlock();
    EXPECT_THROW(m.unlock_checked(), LockLostError);
}

TEST_F(RedisMutexTest, L5_WatchdogRenewsManyHoldsInBatches) {
    constexpr int kHolds = 20;
    std::vector<std::unique_ptr<RedisMutex>> ms;
    for (int i = 0; i < kHolds; ++i) {
        ms.push_back(std::make_unique<RedisMutex>(*a_->locks, "batch" + std::to_string(i),
                                                  MutexOptions{.lease = 900ms}));
    }
    for (auto& m : ms) m->lock();
    const auto s0 = a_->locks->stats();
    // Two renewals of every hold (every 300 ms): the batches are counted over the same rounds.
    ASSERT_TRUE(test::eventually_value([&] { return a_->locks->stats().renewals - s0.renewals; },
                                       [](std::uint64_t n) { return n >= 2u * kHolds; }));
    const auto s1 = a_->locks->stats();
    const auto renewals = s1.renewals - s0.renewals;
    const auto batches = s1.renew_batches - s0.renew_batches;
    EXPECT_GE(renewals, 2u * kHolds);
    EXPECT_LE(batches * 4, renewals) << "renewals should share round trips";
    for (auto& m : ms) {
        EXPECT_FALSE(m->lost());
        m->unlock();
    }
}

TEST_F(RedisMutexTest, L7_HandOverWithoutPollingWithin50msMedian) {
    // 30 s lease: a hand-over by TTL would take ~30 s; only the release message explains a fast one.
    RedisMutex holder(*a_->locks, "handover", {.lease = 30000ms});
    RedisMutex waiter(*b_->locks, "handover", {.lease = 30000ms});
    Arrivals sleeping;
    auto armed = fault::arm("locks.wait.before_sleep", sleeping.action());
    std::vector<double> latencies;
    std::mutex m;
    std::condition_variable cv;
    int round = 0;
    Clock::time_point released;
    std::thread w([&] {
        for (int i = 1; i <= 50; ++i) {
            {
                std::unique_lock l(m);
                cv.wait(l, [&] { return round >= i; });
            }
            waiter.lock();
            auto got = Clock::now();
            {
                std::lock_guard l(m);
                latencies.push_back(std::chrono::duration<double, std::milli>(got - released).count());
            }
            waiter.unlock();
            {
                std::lock_guard l(m);
                round = -i;  // done with round i
            }
            cv.notify_all();
        }
    });
    for (int i = 1; i <= 50; ++i) {
        holder.lock();
        const int before = sleeping.get();
        {
            std::lock_guard l(m);
            round = i;
        }
        cv.notify_all();
        ASSERT_TRUE(sleeping.wait_for(before + 1, 5s));  // the waiter is asleep on the lock
        std::this_thread::sleep_for(2ms);
        {
            std::lock_guard l(m);
            released = Clock::now();
        }
        holder.unlock();
        std::unique_lock l(m);
        ASSERT_TRUE(cv.wait_for(l, 10s, [&] { return round == -i; }));
    }
    w.join();
    std::sort(latencies.begin(), latencies.end());
    const double median = latencies[latencies.size() / 2];
    std::cout << "[ measure  ] hand-over latency over 50: median " << median << " ms, max "
              << latencies.back() << " ms\n";
    EXPECT_LT(median, 50.0);
}

TEST_F(RedisMutexTest, L7_WaiterSleepsInsteadOfPolling) {
    RedisMutex holder(*a_->locks, "nopoll", {.lease = 30000ms});
    RedisMutex waiter(*b_->locks, "nopoll", {.lease = 30000ms});
    holder.lock();
    const auto before = b_->locks->stats().acquire_attempts;
    std::thread w([&] { EXPECT_FALSE(waiter.try_lock_for(1500ms)); });
    w.join();
    // First try, one queued retry, one last try at the deadline: no polling loop.
    EXPECT_LE(b_->locks->stats().acquire_attempts - before, 3u);
    holder.unlock();
    // The waiter that gave up left the queue.
    EXPECT_EQ(a_->redis->command({"ZCARD", holder.keys().mutex_queue()}).integer(), 0);
}

TEST_F(RedisMutexTest, L7_LostWakeUpCostsAtMostTheRemainingTtl) {
    // The holder never releases (as if its release message were lost): the waiter still gets
    // the lock when the lease runs out, not later.
    RedisMutex holder(*a_->locks, "lostwake", {.lease = 800ms, .renew = false});
    RedisMutex waiter(*b_->locks, "lostwake");
    holder.lock();
    const auto t0 = Clock::now();
    std::thread w([&] {
        EXPECT_TRUE(waiter.try_lock_for(5s));
        waiter.unlock();
    });
    w.join();
    const long long waited = ms_since(t0);
    EXPECT_GE(waited, 600);
    EXPECT_LE(waited, 800 + 700);  // the lease, plus slack for a loaded CI machine
    EXPECT_THROW(holder.unlock_checked(), LockLostError);
}

TEST_F(RedisMutexTest, L9_ReleaseWakesExactlyOneWaiter) {
    constexpr int kWaiters = 6;  // 3 in each of two clients
    // L9 is about the Redis wait queue: 3 waiters per client must all be in it, so the local
    // gate (which would keep 2 of each client's 3 in the process) is off here. With the gate on,
    // LocalGateRedisTest.OnlyOneThreadPerClientJoinsTheRedisQueue shows one waiter per client.
    LockClientOptions ungated;
    ungated.local_gate = false;
    a_ = std::make_unique<LockProcess>(prefix_, ungated);
    b_ = std::make_unique<LockProcess>(prefix_, ungated);
    RedisMutex holder(*a_->locks, "herd", {.lease = 30000ms});
    holder.lock();
    Arrivals sleeping;
    auto armed = fault::arm("locks.wait.before_sleep", sleeping.action());
    std::atomic<int> acquired{0};
    std::atomic<bool> checked{false};  // the first woken waiter holds on until the checks are done
    std::vector<std::thread> ws;
    for (int i = 0; i < kWaiters; ++i) {
        ws.emplace_back([&, i] {
            RedisMutex m(i % 2 ? *a_->locks : *b_->locks, "herd", {.lease = 30000ms});
            m.lock();
            acquired.fetch_add(1);
            while (!checked.load()) std::this_thread::sleep_for(1ms);
            m.unlock();
        });
    }
    ASSERT_TRUE(sleeping.wait_for(kWaiters, 5s));
    std::this_thread::sleep_for(100ms);
    auto attempts = [&] { return a_->locks->stats().acquire_attempts + b_->locks->stats().acquire_attempts; };
    auto wakeups = [&] { return a_->locks->stats().wakeups + b_->locks->stats().wakeups; };
    const auto attempts0 = attempts();
    const auto wakeups0 = wakeups();
    holder.unlock();
    const bool one = eventually([&] { return acquired.load() == 1; }, 2s);
    std::this_thread::sleep_for(20ms);  // room for a (wrong) second wake-up to show
    EXPECT_TRUE(one);
    EXPECT_EQ(acquired.load(), 1);
    EXPECT_EQ(wakeups() - wakeups0, 1u) << "one release, one wake-up";
    EXPECT_EQ(attempts() - attempts0, 1u) << "only the woken waiter went to Redis";
    checked = true;
    for (auto& t : ws) t.join();
    EXPECT_EQ(acquired.load(), kWaiters);
    // Every hand-over woke exactly one waiter: no herd over the whole run.
    EXPECT_EQ(wakeups() - wakeups0, static_cast<std::uint64_t>(kWaiters));
}

TEST_F(RedisMutexTest, O1_WithoutTheLockAForcedInterleavingLosesAnUpdate) {
    const std::string key = prefix_ + "counter-unlocked";
    a_->redis->set(key, "0");
    fault::Barrier both_read(2);
    auto increment = [&] {
        auto v = a_->redis->get(key);
        both_read.arrive_and_wait();  // both have read the same value
        a_->redis->set(key, std::to_string(std::stoll(*v) + 1));
    };
    std::thread t1(increment), t2(increment);
    t1.join();
    t2.join();
    EXPECT_EQ(*a_->redis->get(key), "1") << "two increments, one lost";
}

TEST_F(RedisMutexTest, O1_WithTheLockTheSameInterleavingCannotHappen) {
    const std::string key = prefix_ + "counter-locked";
    a_->redis->set(key, "0");
    RedisMutex ma(*a_->locks, "counter");
    RedisMutex mb(*b_->locks, "counter");
    fault::Gate after_read;
    Arrivals b_sleeping;
    auto armed_sleep = fault::arm("locks.wait.before_sleep", b_sleeping.action());
    std::thread a([&] {
        std::scoped_lock hold(ma);
        auto v = a_->redis->get(key);
        after_read.action()();  // A has read; B now tries its read-modify-write
        a_->redis->set(key, std::to_string(std::stoll(*v) + 1));
    });
    ASSERT_TRUE(after_read.wait_arrivals(1, 5s));
    std::thread b([&] {
        std::scoped_lock hold(mb);  // must wait for A
        auto v = b_->redis->get(key);
        b_->redis->set(key, std::to_string(std::stoll(*v) + 1));
    });
    ASSERT_TRUE(b_sleeping.wait_for(1, 5s));  // B is blocked on the lock, before its read
    after_read.open();
    a.join();
    b.join();
    EXPECT_EQ(*a_->redis->get(key), "2");
}

TEST_F(RedisMutexTest, O1_MutualExclusionAcrossTwoProcessesOf8Threads) {
    const std::string key = prefix_ + "counter";
    const std::string name = "mx";
    a_->redis->set(key, "0");
    test::Child child(
        "counter", {{"PREFIX", prefix_}, {"NAME", name}, {"KEY", key}, {"THREADS", "8"}, {"COUNT", "2500"}});
    ASSERT_TRUE(child.expect("READY", 10s));
    child.send("GO");
    const int errors = test::run_locked_increments(*a_->redis, *a_->locks, name, key, 8, 2500);
    auto done = child.expect("DONE", 120s);
    ASSERT_TRUE(done);
    EXPECT_EQ(*done, "DONE 0");
    EXPECT_EQ(errors, 0);
    EXPECT_EQ(child.wait(), 0);
    EXPECT_EQ(*a_->redis->get(key), "5000");
}

TEST_F(RedisMutexTest, L1_KilledHolderFreesTheLockWithinLeasePlusOneSecond) {
    const std::string name = "killed";
    test::Child child("hold", {{"PREFIX", prefix_}, {"NAME", name}, {"LEASE_MS", "2000"}, {"RENEW", "1"}});
    ASSERT_TRUE(child.expect("HELD", 10s));
    std::this_thread::sleep_for(1000ms);  // renewed at least once
    RedisMutex m(*a_->locks, name);
    EXPECT_FALSE(m.try_lock());
    child.signal(SIGKILL);
    const auto killed = Clock::now();
    child.wait();
    ASSERT_TRUE(m.try_lock_for(10s));
    const long long waited = ms_since(killed);
    std::cout << "[ measure  ] lock free " << waited << " ms after SIGKILL (lease 2000 ms)\n";
    EXPECT_LE(waited, 2000 + 1000);
    m.unlock();
}

TEST_F(RedisMutexTest, L5_RenewedTwoSecondLeaseOutlivesSixSecondCriticalSection) {
    const std::string name = "renewed";
    test::Child child(
        "hold",
        {{"PREFIX", prefix_}, {"NAME", name}, {"LEASE_MS", "2000"}, {"RENEW", "1"}, {"HOLD_MS", "6000"}});
    ASSERT_TRUE(child.expect("HELD", 10s));
    const auto held = Clock::now();
    RedisMutex m(*a_->locks, name);
    EXPECT_FALSE(m.try_lock_for(5s)) << "another client got a lock held with a renewed lease";
    ASSERT_TRUE(m.try_lock_for(10s));
    EXPECT_GE(ms_since(held), 5900);
    auto lost = child.expect("LOST", 5s);
    ASSERT_TRUE(lost);
    EXPECT_EQ(*lost, "LOST 0");
    EXPECT_EQ(child.read_line(5s).value_or(""), "UNLOCKED");
    m.unlock();
}

// Per-client latency histograms (LockClientStats::acquire_latency, hold_time): one sample per
// new acquisition and per last unlock; re-entries and failed tries add none. The wait is forced:
// B reaches its wait (locks.wait.before_sleep) while A holds; A lets go only then.
TEST_F(RedisMutexTest, ClientLatencyHistogramsCountAcquisitionsWaitsAndHolds) {
    RedisMutex ma(*a_->locks, "latency");
    RedisMutex mb(*b_->locks, "latency");
    ma.lock();
    ma.lock();  // re-entry: no new sample
    EXPECT_FALSE(mb.try_lock());
    Arrivals waiting;
    std::thread b([&] {
        auto armed = fault::arm("locks.wait.before_sleep", waiting.action(), {.only_thread = std::this_thread::get_id()});
        mb.lock();
        mb.unlock();
    });
    ASSERT_TRUE(waiting.wait_for(1, 10s)) << "B never waited";
    std::this_thread::sleep_for(50ms);  // the measured quantity, not a synchronisation
    ma.unlock();
    ma.unlock();
    b.join();
    const auto a = a_->locks->stats();
    const auto bs = b_->locks->stats();
    EXPECT_EQ(a.acquire_latency.count, 1u);
    EXPECT_EQ(a.hold_time.count, 1u);
    EXPECT_GE(a.hold_time.sum_us, 50'000u) << "A held it at least 50 ms";
    EXPECT_EQ(bs.acquire_latency.count, 1u) << "the failed try_lock adds no sample";
    EXPECT_EQ(bs.hold_time.count, 1u);
    EXPECT_GE(bs.acquire_latency.sum_us, 50'000u) << "B waited for A's 50 ms";
}

}  // namespace
}  // namespace lockstep
