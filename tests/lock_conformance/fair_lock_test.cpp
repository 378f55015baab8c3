// What only the fair Redis mutex has to show: FIFO by server arrival, no barging, a dead waiter
// skipped after its grace, and its cost next to the barging RedisMutex.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <mutex>
#include <thread>
#include <vector>

#include "backends.h"
#include "conformance_child.h"
#include "lockstep/locks/redis_fair_lock_service.h"
#include "lockstep/locks/redis_lock_service.h"
#include "fair_test_support.h"
#include "test_servers.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string fair_prefix() { return fair_test_prefix("fair"); }

TEST(RedisFairMutex, WaitersAcquireInArrivalOrderAndNobodyBarges) {
    LockServiceOptions o;
    o.prefix = fair_prefix();
    RedisFairLockService holder(servers().redis_options(), o), others(servers().redis_options(), o);
    auto m = holder.make_mutex("fifo");
    m->lock();
    std::mutex order_mu;
    std::vector<int> order;
    std::vector<std::thread> waiters;
    for (int i = 0; i < 4; ++i) {
        waiters.emplace_back([&, i] {
            auto w = others.make_mutex("fifo");
            w->lock();
            {
                std::lock_guard g(order_mu);
                order.push_back(i);
            }
            std::this_thread::sleep_for(50ms);  // the line stays non-empty while the newcomer tries
            w->unlock();
        });
        ASSERT_TRUE(line_reaches(others, "fifo", i + 1)) << "waiter " << i << " did not queue";
    }
    // A newcomer's try_lock while the line waits for a free lock: refused even when free.
    m->unlock();
    bool barged = false;
    std::thread([&] {
        auto b = holder.make_mutex("fifo");
        barged = b->try_lock();
        if (barged) b->unlock();
    }).join();
    for (auto& w : waiters) w.join();
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_FALSE(barged) << "a newcomer overtook live waiters";
}

TEST(RedisFairMutex, ADeadWaiterIsSkippedAfterItsGrace) {
    LockServiceOptions o;
    o.prefix = fair_prefix();
    RedisFairLockOptions f;
    f.waiter_grace = 500ms;
    RedisFairLockService holder(servers().redis_options(), o, f), live(servers().redis_options(), o, f);
    auto m = holder.make_mutex("dead");
    m->lock();
    Child dead("hold", {{"LOCKSTEP_CT_URL", backend_url("redis-fair")},
                        {"PREFIX", o.prefix},
                        {"NAME", "dead"},
                        {"LEASE_MS", "30000"}});
    ASSERT_TRUE(line_reaches(holder, "dead", 1));
    dead.signal(SIGKILL);  // first in line, and gone
    dead.wait();
    std::atomic<bool> got{false};
    Clock::time_point acquired;
    std::thread waiter([&] {
        auto w = live.make_mutex("dead");
        w->lock();
        acquired = Clock::now();
        got = true;
        w->unlock();
    });
    ASSERT_TRUE(line_reaches(holder, "dead", 2));
    const auto released = Clock::now();
    m->unlock();
    waiter.join();
    const double ms = std::chrono::duration<double, std::milli>(acquired - released).count();
    std::cout << "[ measure ] redis-fair: live waiter behind a dead one acquired " << ms << " ms after the release\n";
    EXPECT_TRUE(got.load());
    // The release finds the dead waiter's process unsubscribed and tells the next one at once;
    // at worst (a message lost) the live waiter's own re-check, grace/2, finds the lock.
    EXPECT_LT(ms, 500.0) << "the dead waiter blocked the line";
}

// Printed for docs/locks.md: fair vs barging, uncontended cycle and 8-thread throughput.
TEST(RedisFairMutex, CostAgainstTheBargingMutexIsMeasured) {
    LockServiceOptions o;
    o.prefix = fair_prefix();
    RedisLockService barging(servers().redis_options(), o);
    RedisFairLockService fair(servers().redis_options(), o);
    for (LockService* s : {static_cast<LockService*>(&barging), static_cast<LockService*>(&fair)}) {
        auto m = s->make_mutex("cost");
        std::vector<double> cycles;
        for (int i = 0; i < 200; ++i) {
            const auto t0 = Clock::now();
            m->lock();
            m->unlock();
            cycles.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        }
        std::sort(cycles.begin(), cycles.end());
        std::atomic<int> done{0};
        const auto t0 = Clock::now();
        std::vector<std::thread> threads;
        for (int t = 0; t < 8; ++t) {
            threads.emplace_back([&] {
                auto mine = s->make_mutex("cost8");
                for (int i = 0; i < 25; ++i) {
                    std::scoped_lock g(*mine);
                    done.fetch_add(1);
                }
            });
        }
        for (auto& t : threads) t.join();
        const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
        std::cout << "[ measure ] " << s->backend() << ": uncontended cycle p50 " << cycles[100] << " ms; 8 threads "
                  << done.load() / secs << " cycles/s\n";
        EXPECT_EQ(done.load(), 200);
    }
}

}  // namespace
}  // namespace lockstep::test
