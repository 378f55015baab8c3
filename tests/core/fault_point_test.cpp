// Fault points: a disarmed point does nothing; an armed one pauses, blocks at a gate or a barrier,
// or throws, for exactly the hits its ArmOptions select; an Arming disarms when it goes away.
//
// No test here relies on timing for correctness: a thread "is at the point" only once the gate
// has counted its arrival, and the only clock reads check lower bounds (a pause lasts at least
// its duration) or the short max_block that turns a forgotten gate into an error.
#include "lockstep/core/fault_point.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "lockstep/core/error.h"

namespace lockstep::fault {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// An action that counts how often it ran.
Action count_into(std::atomic<int>& counter) {
    return [&counter] { counter.fetch_add(1); };
}

TEST(FaultPoint, UnarmedPointIsANoOp) {
    EXPECT_NO_THROW(point("test.core.never_armed"));
    std::atomic<int> ran{0};
    auto other = arm("test.core.armed_elsewhere", count_into(ran));
    point("test.core.never_armed");  // another point being armed must not make this one act
    EXPECT_EQ(ran.load(), 0);
    EXPECT_EQ(other.hits(), 0);
}

TEST(FaultPoint, DisarmedPointNoLongerActs) {
    std::atomic<int> ran{0};
    Arming armed = arm("test.core.disarm", count_into(ran));
    point("test.core.disarm");
    EXPECT_EQ(ran.load(), 1);
    armed.disarm();
    point("test.core.disarm");
    EXPECT_EQ(ran.load(), 1);
    EXPECT_EQ(armed.hits(), 1);  // hits are counted only while armed
    armed.disarm();              // idempotent
}

TEST(FaultPoint, ArmingDisarmsOnDestruction) {
    std::atomic<int> ran{0};
    {
        auto armed = arm("test.core.scoped", count_into(ran));
        point("test.core.scoped");
        EXPECT_EQ(ran.load(), 1);
    }
    point("test.core.scoped");
    EXPECT_EQ(ran.load(), 1);
}

TEST(FaultPoint, MovedArmingStaysArmedUntilItsNewOwnerGoes) {
    std::atomic<int> ran{0};
    Arming outer;
    EXPECT_EQ(outer.hits(), 0);  // an empty Arming is harmless
    {
        Arming inner = arm("test.core.moved", count_into(ran));
        outer = std::move(inner);
    }  // the moved-from Arming must not disarm
    point("test.core.moved");
    EXPECT_EQ(ran.load(), 1);
    EXPECT_EQ(outer.hits(), 1);
    outer = Arming();  // assigning over an armed Arming disarms it
    point("test.core.moved");
    EXPECT_EQ(ran.load(), 1);
}

TEST(FaultPoint, PauseLastsAtLeastItsDuration) {
    auto armed = arm("test.core.pause", pause(60ms));
    auto start = Clock::now();
    point("test.core.pause");
    EXPECT_GE(Clock::now() - start, 60ms);
    EXPECT_EQ(armed.acted(), 1);
}

TEST(FaultPoint, FailThrowsTheGivenErrorAtThePoint) {
    auto armed = arm("test.core.fail", fail<ConflictError>("stale fence"));
    try {
        point("test.core.fail");
        FAIL() << "the point did not throw";
    } catch (const ConflictError& e) {
        EXPECT_STREQ(e.what(), "stale fence");
    }
    // Every hit throws a fresh copy of the same error.
    EXPECT_THROW(point("test.core.fail"), ConflictError);
    EXPECT_EQ(armed.acted(), 2);
}

TEST(FaultPoint, FailWithAnyException) {
    auto armed = arm("test.core.fail_with", fail_with(std::make_exception_ptr(std::out_of_range("x"))));
    EXPECT_THROW(point("test.core.fail_with"), std::out_of_range);
}

TEST(FaultPoint, SkipPassesThroughTheFirstHits) {
    std::atomic<int> ran{0};
    ArmOptions options;
    options.skip = 2;
    auto armed = arm("test.core.skip", count_into(ran), options);
    point("test.core.skip");
    point("test.core.skip");
    EXPECT_EQ(ran.load(), 0);
    point("test.core.skip");
    point("test.core.skip");
    EXPECT_EQ(ran.load(), 2);
    EXPECT_EQ(armed.hits(), 4);
    EXPECT_EQ(armed.acted(), 2);
}

TEST(FaultPoint, TimesLimitsHowOftenItActs) {
    std::atomic<int> ran{0};
    ArmOptions options;
    options.times = 2;
    auto armed = arm("test.core.times", count_into(ran), options);
    for (int i = 0; i < 5; ++i) point("test.core.times");
    EXPECT_EQ(ran.load(), 2);
    EXPECT_EQ(armed.hits(), 5);
    EXPECT_EQ(armed.acted(), 2);
}

TEST(FaultPoint, SkipAndTimesTogetherSelectAWindow) {
    std::vector<int> acted_on;
    int hit = 0;
    ArmOptions options;
    options.skip = 1;
    options.times = 2;
    auto armed = arm(
        "test.core.window", [&] { acted_on.push_back(hit); }, options);
    for (hit = 1; hit <= 5; ++hit) point("test.core.window");
    EXPECT_EQ(acted_on, (std::vector<int>{2, 3}));
}

TEST(FaultPoint, OnlyThreadActsInThatThreadAlone) {
    std::atomic<int> ran{0};
    auto armed = arm("test.core.only_thread", count_into(ran), {.only_thread = std::this_thread::get_id()});
    std::thread other([] { point("test.core.only_thread"); });
    other.join();
    EXPECT_EQ(ran.load(), 0);
    point("test.core.only_thread");
    EXPECT_EQ(ran.load(), 1);
    EXPECT_EQ(armed.hits(), 2);  // the other thread's hit is counted, but not acted on
    EXPECT_EQ(armed.acted(), 1);
}

TEST(FaultPoint, SkipCountsOnlyTheChosenThreadsHits) {
    // A writer that shares the code path must not use up the reader's skip: otherwise which hit
    // acts would depend on thread timing.
    std::atomic<int> ran{0};
    auto armed = arm("test.core.only_thread_skip", count_into(ran),
                     {.skip = 1, .times = 1, .only_thread = std::this_thread::get_id()});
    std::thread other([] {
        point("test.core.only_thread_skip");
        point("test.core.only_thread_skip");
    });
    other.join();
    point("test.core.only_thread_skip");  // this thread's first hit: skipped
    EXPECT_EQ(ran.load(), 0);
    point("test.core.only_thread_skip");  // its second: acts
    point("test.core.only_thread_skip");  // times = 1: passes
    EXPECT_EQ(ran.load(), 1);
    EXPECT_EQ(armed.hits(), 5);
}

TEST(FaultPoint, StackedArmingsNewestActsThenTheOlderAgain) {
    std::atomic<int> older_ran{0};
    std::atomic<int> newer_ran{0};
    auto older = arm("test.core.stack", count_into(older_ran));
    point("test.core.stack");
    {
        auto newer = arm("test.core.stack", count_into(newer_ran));
        point("test.core.stack");
        point("test.core.stack");
        EXPECT_EQ(newer.hits(), 2);
        EXPECT_EQ(newer.acted(), 2);
    }
    point("test.core.stack");
    EXPECT_EQ(older_ran.load(), 2);
    EXPECT_EQ(newer_ran.load(), 2);
    EXPECT_EQ(older.hits(), 2);  // hits taken by the newer arming are not the older one's
}

TEST(FaultPoint, DisarmingTheOlderOfTwoLeavesTheNewerActing) {
    std::atomic<int> older_ran{0};
    std::atomic<int> newer_ran{0};
    auto older = arm("test.core.stack2", count_into(older_ran));
    auto newer = arm("test.core.stack2", count_into(newer_ran));
    older.disarm();
    point("test.core.stack2");
    EXPECT_EQ(older_ran.load(), 0);
    EXPECT_EQ(newer_ran.load(), 1);
}

TEST(FaultPoint, AnActionMayArmAnotherPoint) {
    // Actions run outside the registry lock; arming from inside one must not deadlock.
    std::atomic<int> inner_ran{0};
    Arming inner;
    auto outer = arm("test.core.outer", [&] { inner = arm("test.core.inner", count_into(inner_ran)); });
    point("test.core.outer");
    point("test.core.inner");
    EXPECT_EQ(inner_ran.load(), 1);
}

TEST(Gate, BlocksAThreadAtThePointUntilOpened) {
    Gate gate(10s);
    auto armed = arm("test.core.gate", gate.action());
    std::atomic<bool> passed{false};
    std::thread reader([&] {
        point("test.core.gate");
        passed = true;
    });
    ASSERT_TRUE(gate.wait_arrivals(1, 10s));
    // The reader has been counted inside the gate's wait, so it cannot be past the point.
    EXPECT_FALSE(passed.load());
    EXPECT_EQ(gate.arrivals(), 1);
    EXPECT_FALSE(gate.wait_arrivals(2, 20ms));  // nobody else is coming
    gate.open();
    reader.join();
    EXPECT_TRUE(passed.load());
}

TEST(Gate, HoldsSeveralThreadsAndReleasesThemAll) {
    Gate gate(10s);
    auto armed = arm("test.core.gate_many", gate.action());
    std::atomic<int> passed{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 3; ++i) {
        threads.emplace_back([&] {
            point("test.core.gate_many");
            passed.fetch_add(1);
        });
    }
    ASSERT_TRUE(gate.wait_arrivals(3, 10s));
    EXPECT_EQ(passed.load(), 0);
    gate.open();
    for (auto& t : threads) t.join();
    EXPECT_EQ(passed.load(), 3);
}

TEST(Gate, AnOpenGateLetsArrivalsThrough) {
    Gate gate(10s);
    gate.open();
    auto armed = arm("test.core.gate_open", gate.action());
    point("test.core.gate_open");
    EXPECT_EQ(gate.arrivals(), 1);
}

TEST(Gate, NeverOpenedTimesOutInsteadOfHanging) {
    Gate gate(50ms);
    auto armed = arm("test.core.gate_forgotten", gate.action());
    auto start = Clock::now();
    EXPECT_THROW(point("test.core.gate_forgotten"), TimeoutError);
    EXPECT_GE(Clock::now() - start, 50ms);
}

TEST(Gate, CopiesShareOneGate) {
    Gate gate(10s);
    Gate copy = gate;
    auto armed = arm("test.core.gate_copy", copy.action());
    std::thread t([] { point("test.core.gate_copy"); });
    ASSERT_TRUE(gate.wait_arrivals(1, 10s));
    gate.open();
    t.join();
    EXPECT_EQ(copy.arrivals(), 1);
}

TEST(Barrier, ThreeThreadsAllArriveBeforeAnyGoesOn) {
    Barrier barrier(3, 10s);
    auto armed = arm("test.core.barrier", barrier.action());
    std::atomic<int> arrived{0};
    std::atomic<int> saw_all{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 3; ++i) {
        threads.emplace_back([&] {
            for (int round = 1; round <= 2; ++round) {  // the barrier is reusable
                arrived.fetch_add(1);
                point("test.core.barrier");
                if (arrived.load() >= 3 * round) saw_all.fetch_add(1);
                // The second round must not start before every thread has checked the first.
                barrier.arrive_and_wait();
            }
        });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(saw_all.load(), 6);
    EXPECT_EQ(armed.acted(), 6);
}

TEST(Barrier, TestCodeCanBeOneOfTheParties) {
    Barrier barrier(3, 10s);
    auto armed = arm("test.core.barrier_party", barrier.action());
    std::atomic<int> past{0};
    std::thread a([&] {
        point("test.core.barrier_party");
        past.fetch_add(1);
    });
    std::thread b([&] {
        point("test.core.barrier_party");
        past.fetch_add(1);
    });
    barrier.arrive_and_wait();  // returns only once a and b are at the point
    a.join();
    b.join();
    EXPECT_EQ(past.load(), 2);
}

TEST(Barrier, MissingPartyTimesOut) {
    Barrier barrier(2, 50ms);
    EXPECT_THROW(barrier.arrive_and_wait(), TimeoutError);
}

TEST(Barrier, NeedsAtLeastOneParty) {
    EXPECT_THROW(Barrier(0), ConfigError);
    Barrier alone(1);
    EXPECT_NO_THROW(alone.arrive_and_wait());
}

}  // namespace
}  // namespace lockstep::fault
