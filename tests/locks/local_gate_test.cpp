// The local gate alone (locks/src/local_gate.h), without Redis: entering, deadlines, the direct
// hand-over to the oldest waiter once it waited handoff_after, close(), GatePass, the table.
// Every interleaving is forced: a waiter is known to be queued (waiting()) before the step that
// matters, never assumed after a sleep.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "../../locks/redis/src/local_gate.h"
#include "eventually.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Entry = LocalGate::Entry;
using test::eventually;

constexpr auto kForever = Clock::time_point::max();

TEST(LocalGateTest, UncontendedEnterAndLeave) {
    LocalGate gate(5ms);
    EXPECT_FALSE(gate.taken());
    std::atomic<std::uint64_t> waits{0};
    EXPECT_EQ(gate.enter(std::nullopt, &waits), Entry::Entered);
    EXPECT_EQ(waits.load(), 0u);
    EXPECT_TRUE(gate.taken());
    // try_lock() shape: no wait allowed, taken: fails at once.
    EXPECT_EQ(gate.enter(std::nullopt, &waits), Entry::TimedOut);
    EXPECT_EQ(waits.load(), 0u);
    gate.leave();
    EXPECT_FALSE(gate.taken());
    EXPECT_EQ(gate.enter(Clock::now() - 1s), Entry::Entered) << "a free gate is taken even past the deadline";
    gate.leave();
}

TEST(LocalGateTest, AWaiterGivesUpAtItsDeadlineAndLeavesTheQueue) {
    LocalGate gate(5ms);
    ASSERT_EQ(gate.enter(std::nullopt), Entry::Entered);
    const auto t0 = Clock::now();
    std::atomic<std::uint64_t> waits{0};
    EXPECT_EQ(gate.enter(t0 + 100ms, &waits), Entry::TimedOut);
    EXPECT_GE(Clock::now() - t0, 100ms);
    EXPECT_EQ(waits.load(), 1u);
    EXPECT_EQ(gate.waiting(), 0u);
    EXPECT_TRUE(gate.taken());
    gate.leave();
    EXPECT_FALSE(gate.taken());
}

// handoff_after 0: every leave() hands the gate to the oldest waiter; the leaving thread cannot
// take it back (no barging), and waiters get it in arrival order.
TEST(LocalGateTest, StrictHandOffServesWaitersInArrivalOrder) {
    LocalGate gate(0ms);
    ASSERT_EQ(gate.enter(std::nullopt), Entry::Entered);
    std::mutex m;
    std::vector<int> order;
    std::vector<std::thread> ts;
    std::promise<void> checked;  // the first waiter keeps the gate until the leaver has tried
    std::shared_future<void> checked_f = checked.get_future().share();
    constexpr int kWaiters = 4;
    for (int i = 0; i < kWaiters; ++i) {
        ts.emplace_back([&, i] {
            ASSERT_EQ(gate.enter(kForever), Entry::Entered);
            if (i == 0) checked_f.wait();
            {
                std::lock_guard l(m);
                order.push_back(i);
            }
            gate.leave();
        });
        // Waiter i is queued before waiter i+1 starts: the arrival order is known.
        ASSERT_TRUE(eventually([&] { return gate.waiting() == static_cast<std::size_t>(i + 1); }));
    }
    gate.leave();
    EXPECT_EQ(gate.enter(std::nullopt), Entry::TimedOut) << "handed over: the leaver cannot barge back";
    checked.set_value();
    for (auto& t : ts) t.join();
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_FALSE(gate.taken());
}

// Go's starvation rule: a waiter that has waited handoff_after gets the gate directly.
TEST(LocalGateTest, AWaiterThatWaitedHandOffAfterIsHandedTheGate) {
    LocalGate gate(30ms);
    ASSERT_EQ(gate.enter(std::nullopt), Entry::Entered);
    std::promise<Entry> got;
    std::promise<void> checked;  // the waiter keeps the gate until the leaver has tried
    std::thread waiter([&] {
        const Entry e = gate.enter(kForever);
        got.set_value(e);
        checked.get_future().wait();
        if (e == Entry::Entered) gate.leave();
    });
    ASSERT_TRUE(eventually([&] { return gate.waiting() == 1u; }));
    // The property is about time: the waiter queued before this point, so once 30 ms have
    // passed it has waited at least handoff_after.
    std::this_thread::sleep_for(30ms);
    gate.leave();
    EXPECT_EQ(gate.enter(std::nullopt), Entry::TimedOut) << "the gate went to the waiter, not back to the leaver";
    checked.set_value();
    EXPECT_EQ(got.get_future().get(), Entry::Entered);
    waiter.join();
}

// Before handoff_after the gate is freed and the oldest waiter woken to compete: whoever takes
// it, every waiter gets it in the end (no wake-up lost when a woken waiter times out as head).
TEST(LocalGateTest, BargingModeLosesNoWaiter) {
    LocalGate gate(std::chrono::hours(1));
    ASSERT_EQ(gate.enter(std::nullopt), Entry::Entered);
    std::atomic<int> entered{0};
    std::vector<std::thread> ts;
    for (int i = 0; i < 3; ++i) {
        ts.emplace_back([&] {
            if (gate.enter(kForever) == Entry::Entered) {
                entered.fetch_add(1);
                gate.leave();
            }
        });
    }
    // One more waiter with a short deadline: it times out as the head or behind, and must not
    // take the others' wake-up with it.
    ASSERT_TRUE(eventually([&] { return gate.waiting() == 3u; }));
    EXPECT_EQ(gate.enter(Clock::now() + 50ms), Entry::TimedOut);
    gate.leave();
    for (auto& t : ts) t.join();
    EXPECT_EQ(entered.load(), 3);
    EXPECT_FALSE(gate.taken());
    EXPECT_EQ(gate.waiting(), 0u);
}

TEST(LocalGateTest, CloseWakesEveryWaiterAndRefusesLaterEntries) {
    LocalGate gate(5ms);
    ASSERT_EQ(gate.enter(std::nullopt), Entry::Entered);
    std::vector<std::future<Entry>> results;
    results.push_back(std::async(std::launch::async, [&] { return gate.enter(kForever); }));
    results.push_back(std::async(std::launch::async, [&] { return gate.enter(Clock::now() + 1h); }));
    ASSERT_TRUE(eventually([&] { return gate.waiting() == 2u; }));
    gate.close();
    for (auto& r : results) EXPECT_EQ(r.get(), Entry::Closed);
    EXPECT_EQ(gate.waiting(), 0u);
    EXPECT_EQ(gate.enter(kForever), Entry::Closed);
    EXPECT_TRUE(gate.taken()) << "the owner keeps the gate until its leave()";
    gate.leave();
    EXPECT_EQ(gate.enter(std::nullopt), Entry::Closed);
}

// A waiter probes every `every` while it waits, keeping its place; a probe that succeeds seizes
// the gate, and the seized owner's leave() is then ignored (its passage is over).
TEST(LocalGateTest, ASuccessfulProbeSeizesTheGateAndTheOldPassageEnds) {
    LocalGate gate(std::chrono::hours(1));
    std::uint64_t old_passage = 0;
    ASSERT_EQ(gate.enter(std::nullopt, nullptr, &old_passage), Entry::Entered);
    std::atomic<int> probes{0};
    std::atomic<bool> free_now{false};
    LocalGate::Probe probe;
    probe.every = 10ms;
    probe.probe = [&] {
        probes.fetch_add(1);
        return free_now.load();
    };
    std::uint64_t new_passage = 0;
    auto seizer = std::async(std::launch::async, [&] { return gate.enter(kForever, nullptr, &new_passage, &probe); });
    ASSERT_TRUE(eventually([&] { return probes.load() >= 2; })) << "it probes while it waits";
    EXPECT_EQ(gate.waiting(), 1u) << "probing keeps its place";
    free_now = true;
    EXPECT_EQ(seizer.get(), Entry::Entered);
    EXPECT_NE(new_passage, old_passage);
    gate.leave(old_passage);  // the seized owner's late leave
    EXPECT_TRUE(gate.taken()) << "ignored: the seizer owns the gate";
    gate.leave(new_passage);
    EXPECT_FALSE(gate.taken());
}

TEST(LocalGateTest, GatePassLeavesExactlyOnce) {
    LocalGate gate(5ms);
    {
        ASSERT_EQ(gate.enter(std::nullopt), Entry::Entered);
        GatePass a(&gate, gate.current_passage());
        GatePass b(std::move(a));
        EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
        EXPECT_TRUE(b);
        GatePass c;
        c = std::move(b);
        EXPECT_TRUE(gate.taken());
    }
    EXPECT_FALSE(gate.taken());
    // An exception unwinding a pass leaves the gate too.
    try {
        ASSERT_EQ(gate.enter(std::nullopt), Entry::Entered);
        GatePass p(&gate, gate.current_passage());
        throw std::runtime_error("boom");
    } catch (const std::runtime_error&) {
    }
    EXPECT_FALSE(gate.taken());
}

TEST(LocalGateTest, TableSharesAGatePerKeyForgetsUnusedOnesAndClosesLaterOnes) {
    LocalGateTable table(5ms);
    auto a = table.get("k");
    auto b = table.get("k");
    EXPECT_EQ(a.get(), b.get());
    EXPECT_NE(a.get(), table.get("other").get());
    for (int i = 0; i < 1000; ++i) table.get("name-" + std::to_string(i));  // dropped at once
    EXPECT_LT(table.size(), 200u) << "gates nobody uses are swept as the table grows";
    EXPECT_EQ(table.get("k").get(), a.get()) << "a gate in use is kept";
    ASSERT_EQ(a->enter(std::nullopt), Entry::Entered);
    table.close_all();
    EXPECT_EQ(b->enter(kForever), Entry::Closed);
    EXPECT_EQ(table.get("new")->enter(std::nullopt), Entry::Closed);
    a->leave();
}

}  // namespace
}  // namespace lockstep
