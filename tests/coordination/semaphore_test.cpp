// Semaphore on the real Redis and ZooKeeper: never more holders than permits, a killed holder's
// permits free within the lease (Redis) or the session timeout (ZooKeeper), tokens increase, and
// on Redis a lost permit is reported and nothing is left without a TTL.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backends.h"
#include "conformance_child.h"
#include "child_role.h"
#include "eventually.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/coordination/semaphore.h"
#include "lockstep/core/error.h"
#include "lockstep/core/mutex.h"
#include "test_servers.h"
#ifdef LOCKSTEP_HAVE_ZOOKEEPER
#include "lockstep/servers/local_zookeeper.h"
#endif

namespace {

using namespace lockstep;
using namespace std::chrono_literals;

using lockstep::test::child::env;
using lockstep::test::child::say;

// Takes COUNT permits of NAME (PERMITS, LEASE_MS), says HELD, and keeps them until stdin closes.
int semaphore_holder_role() {
    LockServiceOptions so;
    so.prefix = env("PREFIX");
    auto service = open_lock_service(env("LOCKSTEP_CT_URL"), so);
    auto sem = make_semaphore(*service, env("NAME"),
                              {.permits = std::stoi(env("PERMITS")), .lease = std::chrono::milliseconds(std::stoll(env("LEASE_MS")))});
    std::vector<SemaphorePermit> permits;
    for (int i = 0; i < std::stoi(env("COUNT")); ++i) permits.push_back(sem->acquire());
    say("HELD");
    std::string line;
    while (std::getline(std::cin, line)) {
    }
    return 0;
}

// Child roles of this file are named by LOCKSTEP_COORDINATION_CHILD (see leader_latch_test.cpp).
struct RunSemaphoreChildRole {
    RunSemaphoreChildRole() {
        lockstep::test::child::run_if_named("LOCKSTEP_COORDINATION_CHILD", "semaphore-holder", semaphore_holder_role);
    }
} run_semaphore_child_role;

}  // namespace

namespace lockstep::test {
#ifdef LOCKSTEP_HAVE_ZOOKEEPER
// The private ensemble of tests/lock_conformance/backends.cpp.
LocalZooKeeper& zookeeper();
#endif
namespace {

using Clock = std::chrono::steady_clock;

std::string fresh_prefix() {
    static std::atomic<int> n{0};
    return "sm" + std::to_string(::getpid()) + "_" + std::to_string(n.fetch_add(1)) + ":";
}

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

class SemaphoreTest : public ::testing::Test {
protected:
    void SetUp() override { prefix_ = fresh_prefix(); }
    std::unique_ptr<LockService> open() { return open_backend("redis", prefix_); }
    std::string prefix_;
};

class SemaphoreOnEveryBackendTest : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        if (backend_url(GetParam()).empty()) GTEST_SKIP() << GetParam() << " cannot run here";
        prefix_ = fresh_prefix();
    }
    std::unique_ptr<LockService> open() { return open_backend(GetParam(), prefix_); }
    std::string prefix_;
};

TEST_P(SemaphoreOnEveryBackendTest, SixteenThreadsNeverHoldMoreThanEightPermits) {
    // Two services stand for two processes, 8 threads each.
    auto first = open();
    auto second = open();
    auto sem_a = make_semaphore(*first, "pool", {.permits = 8, .lease = 3s});
    auto sem_b = make_semaphore(*second, "pool", {.permits = 8, .lease = 3s});
    std::atomic<int> in_use{0}, most{0}, errors{0};
    std::atomic<long> cycles{0};
    std::vector<FenceToken> tokens_seen;
    // A ZooKeeper handover (a delete, a watch event, a listing) takes longer than a Redis one: the
    // permits are held longer there, so that all eight are in use at some instant.
    const auto hold = GetParam() == "zookeeper" ? std::chrono::microseconds(5000) : std::chrono::microseconds(200);
    const auto until = Clock::now() + 5s;
    std::vector<std::thread> threads;
    for (int t = 0; t < 16; ++t) {
        threads.emplace_back([&, t] {
            Semaphore& sem = t % 2 ? *sem_a : *sem_b;
            while (Clock::now() < until) {
                try {
                    auto permit = sem.try_acquire_for(5s);
                    if (!permit) {
                        errors.fetch_add(1);
                        continue;
                    }
                    const int now = in_use.fetch_add(1) + 1;
                    int m = most.load();
                    while (now > m && !most.compare_exchange_weak(m, now)) {
                    }
                    std::this_thread::sleep_for(hold);
                    in_use.fetch_sub(1);
                    permit->release_checked();
                    cycles.fetch_add(1);
                } catch (const std::exception& e) {
                    std::cerr << "semaphore cycle failed: " << e.what() << "\n";
                    errors.fetch_add(1);
                }
            }
        });
    }
    for (auto& t : threads) t.join();
    std::cout << "[ measure ] 16 threads, 8 permits: " << cycles.load() << " acquire/release cycles in 5 s, at most "
              << most.load() << " permits in use at once\n";
    EXPECT_LE(most.load(), 8);
    EXPECT_EQ(most.load(), 8) << "the permits were never all in use: the test did not contend";
    EXPECT_EQ(errors.load(), 0);
    EXPECT_EQ(sem_a->available(), 8);
}

TEST_P(SemaphoreOnEveryBackendTest, AKilledHoldersPermitsFreeWithinTheLease) {
    const auto lease = 1000ms;
    Child holder("", {{"LOCKSTEP_COORDINATION_CHILD", "semaphore-holder"},
                      {"LOCKSTEP_CT_URL", backend_url(GetParam())},
                      {"PREFIX", prefix_},
                      {"NAME", "pool"},
                      {"PERMITS", "2"},
                      {"LEASE_MS", std::to_string(lease.count())},
                      {"COUNT", "2"}});
    ASSERT_TRUE(holder.expect("HELD", 20s));
    auto service = open();
    auto sem = make_semaphore(*service, "pool", {.permits = 2, .lease = lease});
    EXPECT_FALSE(sem->try_acquire());
    // Past several renewals (lease/3): the living child keeps its permits.
    EXPECT_FALSE(sem->try_acquire_for(1500ms));

    holder.signal(SIGKILL);
    holder.wait();
    const auto killed_at = Clock::now();
    auto one = sem->try_acquire_for(10s);
    auto two = sem->try_acquire_for(10s);
    const double took = ms_since(killed_at);
    ASSERT_TRUE(one && two);
    std::cout << "[ measure ] both permits of a SIGKILLed holder free " << took << " ms after the kill (lease "
              << lease.count() << " ms)\n";
    // Redis: the lease; ZooKeeper: the session timeout of the child's URL (the node is ephemeral),
    // plus the server's expiry check, which runs once per tick (the conformance suite's bound).
    const double bound = GetParam() == "zookeeper"
                             ? static_cast<double>(backend_traits(GetParam()).kill_bound.count()) + 1000.0
                             : static_cast<double>(lease.count()) + 300.0;
    EXPECT_LT(took, bound);
    EXPECT_GT(two->fence_token(), one->fence_token());
}

TEST_P(SemaphoreOnEveryBackendTest, NPlusOneHoldersNeverCoexistAndAPermitReleasedOnAnotherThreadFreesItsSlot) {
    constexpr int permits = 3;
    auto first = open();
    auto second = open();
    auto sem_a = make_semaphore(*first, "pool", {.permits = permits, .lease = 3s});
    auto sem_b = make_semaphore(*second, "pool", {.permits = permits, .lease = 3s});
    // The history: +1 when a holder got its permit, -1 before it releases, recorded in order.
    Mutex history_mutex;
    std::vector<int> history;
    auto record = [&](int step) {
        MutexLock lock(history_mutex);
        history.push_back(step);
    };
    std::vector<SemaphorePermit> held(permits);
    std::barrier all_hold(permits + 1);
    std::vector<std::thread> holders;
    for (int t = 0; t < permits; ++t) {
        holders.emplace_back([&, t] {
            held[t] = (t % 2 ? *sem_a : *sem_b).acquire();
            record(+1);
            all_hold.arrive_and_wait();
        });
    }
    all_hold.arrive_and_wait();
    for (auto& t : holders) t.join();
    // Every permit is in use: a fourth holder, in either process, is refused.
    EXPECT_FALSE(sem_a->try_acquire());
    EXPECT_FALSE(sem_b->try_acquire_for(300ms));
    EXPECT_EQ(sem_a->available(), 0);

    // The fourth waits; one permit is released on a thread that did not acquire it.
    std::optional<SemaphorePermit> fourth;
    std::thread waiter([&] {
        fourth = sem_a->try_acquire_for(20s);
        if (fourth) record(+1);
    });
    std::thread releaser([&] {
        record(-1);
        held[0].release_checked();
    });
    releaser.join();
    waiter.join();
    ASSERT_TRUE(fourth);
    EXPECT_FALSE(fourth->lost());
    int in_use = 0, most = 0;
    for (int step : history) most = std::max(most, in_use += step);
    EXPECT_EQ(most, permits) << "never more holders than permits at any step of the history";
    fourth->release_checked();
    for (int t = 1; t < permits; ++t) held[t].release_checked();
    EXPECT_EQ(sem_a->available(), permits);
}

TEST_P(SemaphoreOnEveryBackendTest, TokensStrictlyIncreaseAcrossProcesses) {
    auto first = open();
    auto second = open();
    auto sem_a = make_semaphore(*first, "pool", {.permits = 2, .lease = 3s});
    auto sem_b = make_semaphore(*second, "pool", {.permits = 2, .lease = 3s});
    FenceToken last = 0;
    for (int i = 0; i < 20; ++i) {
        auto p = (i % 2 ? *sem_a : *sem_b).acquire();
        EXPECT_GT(p.fence_token(), last) << "acquisition " << i;
        last = p.fence_token();
        p.release_checked();
    }
}

TEST_P(SemaphoreOnEveryBackendTest, MaxWaitGivesATimeoutError) {
    auto service = open();
    auto sem = make_semaphore(*service, "pool", {.permits = 1, .lease = 3s, .max_wait = 300ms});
    auto held = sem->acquire();
    const auto started = Clock::now();
    EXPECT_THROW((void)sem->acquire(), TimeoutError);
    EXPECT_GE(ms_since(started), 290.0);
    held.release_checked();
    EXPECT_NO_THROW(sem->acquire().release_checked());
}

// max_hold (SemaphoreOptions::max_hold, LockOptions::max_hold's): at the cap the permit is
// reported lost with MaxHoldReached, its stop token requested, and its slot given back, so a
// waiting rival gets it long before the lease would run out; the holder's release_checked() then
// throws LockLostError naming the reason, and the loss is reported once.
TEST_P(SemaphoreOnEveryBackendTest, APermitThatReachesMaxHoldIsEndedWithTheReasonAndItsSlotFrees) {
    std::atomic<int> capped{0}, other_losses{0};
    auto first = open();
    auto second = open();
    auto sem = make_semaphore(*first, "pool",
                              {.permits = 1, .lease = 10s, .max_hold = 300ms, .on_lost = [&](const LockLoss& l) {
                                   (l.reason == LockLossReason::MaxHoldReached ? capped : other_losses).fetch_add(1);
                               }});
    auto rival_sem = make_semaphore(*second, "pool", {.permits = 1, .lease = 10s});
    const auto t0 = Clock::now();
    SemaphorePermit permit = sem->acquire();
    const std::stop_token stop = permit.stop_token();
    std::optional<SemaphorePermit> rival;
    double rival_ms = 0;
    std::thread waiter([&] {
        rival = rival_sem->try_acquire_for(20s);
        rival_ms = ms_since(t0);
    });
    const bool stopped = eventually([&] { return stop.stop_requested(); }, 10s, 1ms);
    const double stopped_ms = ms_since(t0);
    waiter.join();
    ASSERT_TRUE(stopped) << "max_hold did not request the stop token";
    std::cout << "[ measure ] " << GetParam() << ": permit max_hold 300 ms: stop token at " << stopped_ms
              << " ms, the rival got the slot at " << rival_ms << " ms (lease 10 s)\n";
    EXPECT_GE(stopped_ms, 295.0);
    ASSERT_TRUE(rival) << "the slot was not given back at max_hold";
    EXPECT_LT(rival_ms, 5000.0) << "the slot freed by the lease, not by max_hold";
    EXPECT_TRUE(permit.lost());
    EXPECT_EQ(sem->held(), 0u);
    EXPECT_TRUE(eventually([&] { return capped.load() == 1; }, 5s));
    try {
        permit.release_checked();
        ADD_FAILURE() << "release_checked() of a permit ended at max_hold did not throw";
    } catch (const LockLostError& e) {
        EXPECT_NE(std::string(e.what()).find(to_string(LockLossReason::MaxHoldReached)), std::string::npos) << e.what();
    }
    EXPECT_FALSE(permit.held());
    EXPECT_EQ(capped.load(), 1) << "the cap is reported once";
    EXPECT_EQ(other_losses.load(), 0);
    rival->release_checked();

    // A permit released before its cap is never reported.
    auto quick = sem->acquire();
    quick.release_checked();
    std::this_thread::sleep_for(400ms);  // past where the cap would have been
    EXPECT_EQ(capped.load(), 1);
}

// A permit keeps the Hold contract (docs/holds.md): a release does not request the stop token;
// an empty permit throws NotOwnerError from release() and release_checked(), is not lost and has
// no stop state; moving hands the permit on.
TEST_P(SemaphoreOnEveryBackendTest, APermitKeepsTheHoldContractForReleaseAndEmptyValues) {
    auto service = open();
    auto sem = make_semaphore(*service, "pool", {.permits = 1, .lease = 3s});
    SemaphorePermit permit = sem->acquire();
    EXPECT_TRUE(permit.held());
    EXPECT_EQ(permit.name(), "pool");
    const std::stop_token stop = permit.stop_token();
    EXPECT_TRUE(stop.stop_possible());
    SemaphorePermit moved = std::move(permit);
    EXPECT_FALSE(permit.held());
    std::thread([&] { moved.release_checked(); }).join();
    EXPECT_FALSE(stop.stop_requested()) << "a release is no loss";
    EXPECT_EQ(sem->available(), 1);

    for (SemaphorePermit* empty : {&permit, &moved}) {
        EXPECT_FALSE(empty->held());
        EXPECT_FALSE(empty->lost());
        EXPECT_FALSE(empty->stop_token().stop_possible());
        EXPECT_THROW(empty->release(), NotOwnerError);
        EXPECT_THROW(empty->release_checked(), NotOwnerError);
        EXPECT_THROW((void)empty->fence_token(), NotOwnerError);
        EXPECT_THROW((void)empty->name(), NotOwnerError);
    }
    SemaphorePermit never;
    EXPECT_THROW(never.release(), NotOwnerError);

    // Move assignment over a held permit releases it.
    SemaphorePermit a = sem->acquire();
    a = SemaphorePermit();
    EXPECT_EQ(sem->available(), 1);
}

INSTANTIATE_TEST_SUITE_P(Backends, SemaphoreOnEveryBackendTest, ::testing::Values("redis", "zookeeper"),
                         [](const auto& info) { return backend_test_name(info.param); });

#ifdef LOCKSTEP_HAVE_ZOOKEEPER
TEST(ZooKeeperSemaphoreTest, APermitIsReportedLostAfterASessionTimeoutWithoutTheEnsemble) {
    auto service = open_backend("zookeeper", fresh_prefix());
    std::atomic<int> losses{0};
    std::atomic<int> reason{-1};
    auto sem = make_semaphore(*service, "pool", {.permits = 1, .on_lost = [&](const LockLoss& l) {
                                                     reason = static_cast<int>(l.reason);
                                                     losses.fetch_add(1);
                                                 }});
    auto permit = sem->acquire();
    const std::stop_token stop = permit.stop_token();
    // The ensemble stops answering (SIGSTOP): the client stays disconnected past its session timeout.
    ASSERT_EQ(::kill(zookeeper().pid(), SIGSTOP), 0);
    const auto stopped_at = Clock::now();
    const bool noticed = eventually([&] { return stop.stop_requested(); }, 10s);
    const double took = ms_since(stopped_at);
    ASSERT_EQ(::kill(zookeeper().pid(), SIGCONT), 0);
    ASSERT_TRUE(noticed);
    std::cout << "[ measure ] a ZooKeeper permit reported lost " << took << " ms after the ensemble stopped (session timeout 1,500 ms)\n";
    EXPECT_GE(took, 1000.0) << "not before the session timeout (less the client's detection of the disconnection)";
    EXPECT_TRUE(permit.lost());
    EXPECT_EQ(losses.load(), 1);
    EXPECT_EQ(reason.load(), static_cast<int>(LockLossReason::Unreachable));
    EXPECT_THROW(permit.release_checked(), LockLostError);
    EXPECT_EQ(losses.load(), 1) << "one loss is reported once";
    // Back with the ensemble, the semaphore grants again (a new session if the old one expired).
    auto again = sem->try_acquire_for(20s);
    ASSERT_TRUE(again);
    EXPECT_FALSE(again->lost());
    again->release_checked();
}
#endif

TEST_F(SemaphoreTest, ALostPermitIsReportedByTheWatchdogAndByRelease) {
    auto service = open();
    std::atomic<int> losses{0};
    auto sem = make_semaphore(*service, "pool", {.permits = 2, .lease = 600ms, .on_lost = [&](const LockLoss& l) {
                                                     EXPECT_EQ(l.name, "pool");
                                                     losses.fetch_add(1);
                                                 }});
    RedisClient redis(servers().redis_options());

    // Taken away behind the holder's back: the watchdog's renewal finds it gone.
    auto permit = sem->acquire();
    const std::stop_token stop = permit.stop_token();
    EXPECT_EQ(redis.command({"ZCARD", sem->permits_key()}).integer(), 1);
    redis.del({sem->permits_key()});
    ASSERT_TRUE(eventually([&] { return stop.stop_requested(); }, 5s));
    EXPECT_TRUE(permit.lost());
    ASSERT_TRUE(eventually([&] { return losses.load() == 1; }));
    EXPECT_EQ(sem->held(), 0u);
    EXPECT_THROW(permit.release_checked(), LockLostError);
    EXPECT_FALSE(permit);
    EXPECT_THROW(permit.release_checked(), NotOwnerError);
    EXPECT_EQ(losses.load(), 1) << "one loss is reported once";

    // Found gone by the release itself, before any renewal.
    auto second = sem->acquire();
    redis.del({sem->permits_key()});
    EXPECT_THROW(second.release_checked(), LockLostError);
    EXPECT_EQ(losses.load(), 2);

    // release() (and the destructor) report it without throwing.
    auto third = sem->acquire();
    redis.del({sem->permits_key()});
    EXPECT_NO_THROW(third.release());
    EXPECT_EQ(losses.load(), 3);
}

TEST_F(SemaphoreTest, EveryKeyHasATtlAndAnIdleSemaphoreDisappears) {
    auto service = open();
    auto sem = make_semaphore(*service, "pool", {.permits = 3, .lease = 800ms});
    RedisClient redis(servers().redis_options());
    {
        auto a = sem->acquire();
        auto b = sem->acquire();
        EXPECT_GT(b.fence_token(), a.fence_token());
        EXPECT_EQ(sem->available(), 1);
        for (const auto& key : {sem->permits_key(), sem->fence_key()}) {
            const long long ttl = redis.command({"PTTL", key}).integer();
            EXPECT_GT(ttl, 0) << key;
            EXPECT_LE(ttl, 800) << key;
        }
        // Renewed, the permits outlive several leases.
        const long before = sem->renewals();
        ASSERT_TRUE(eventually([&] { return sem->renewals() >= before + 4; }));
        EXPECT_FALSE(a.lost());
        EXPECT_EQ(redis.command({"ZCARD", sem->permits_key()}).integer(), 2);
        EXPECT_GT(redis.command({"PTTL", sem->permits_key()}).integer(), 0);
    }
    EXPECT_EQ(redis.command({"EXISTS", sem->permits_key()}).integer(), 0) << "the last release removes the zset";
    ASSERT_TRUE(eventually([&] { return redis.command({"EXISTS", sem->fence_key()}).integer() == 0; }, 5s));
    // Tokens keep increasing after the counter expired (they never go below the server clock).
    auto c = sem->acquire();
    EXPECT_GT(c.fence_token(), 0);
}

TEST_F(SemaphoreTest, AReleaseWakesAWaiterLongBeforeThePermitWouldExpire) {
    auto service = open();
    auto sem = make_semaphore(*service, "pool", {.permits = 1, .lease = 30s});
    RedisClient redis(servers().redis_options());
    auto held = sem->acquire();
    std::optional<SemaphorePermit> got;
    Clock::time_point acquired;
    std::thread waiter([&] {
        got = sem->try_acquire_for(20s);
        acquired = Clock::now();
    });
    // The waiter listens for releases once it has found the semaphore full (its channel, held by
    // the permit's hash tag, has a subscriber); only then is a wake-up by message what is tested.
    const std::string channel = sem->permits_key() + ":ch";
    ASSERT_TRUE(eventually([&] {
        const RedisReply r = redis.command({"PUBSUB", "SHARDNUMSUB", channel});
        return r.elements().size() == 2 && r.elements()[1].integer() >= 1;
    }));
    const auto released = Clock::now();
    held.release_checked();
    waiter.join();
    ASSERT_TRUE(got) << "the release message woke the waiter";
    const double waited_ms = std::chrono::duration<double, std::milli>(acquired - released).count();
    EXPECT_LT(waited_ms, 5000.0) << "woken by the release, not by the held permit's expiry 30 s later";
    got->release_checked();
}

TEST_F(SemaphoreTest, TokensIncreaseAfterTheCounterIsGone) {
    auto service = open();
    auto sem = make_semaphore(*service, "pool", {.permits = 1, .lease = 5s});
    RedisClient redis(servers().redis_options());
    FenceToken last = 0;
    for (int i = 0; i < 3; ++i) {
        auto p = sem->acquire();
        EXPECT_GT(p.fence_token(), last);
        last = p.fence_token();
        redis.del({sem->fence_key()});
    }
}

TEST_F(SemaphoreTest, BackendsWithoutSemaphoresRefuseWithAConfigError) {
    for (const std::string backend : {"mysql", "memory"}) {
        auto service = open_backend(backend, prefix_);
        try {
            (void)make_semaphore(*service, "pool", {.permits = 2});
            ADD_FAILURE() << backend << " made a semaphore";
        } catch (const ConfigError& e) {
            EXPECT_NE(std::string(e.what()).find(backend == "mysql" ? "GET_LOCK" : "memory"), std::string::npos)
                << e.what();
        }
    }
    auto service = open();
    EXPECT_THROW(make_semaphore(*service, "pool", {.permits = 0}), ConfigError);
    EXPECT_THROW(make_semaphore(*service, "bad name", {.permits = 1}), ConfigError);
    EXPECT_THROW(make_semaphore(*service, "pool", {.permits = 1, .max_hold = 0ms}), ConfigError);
}

}  // namespace
}  // namespace lockstep::test
