// The hold timer alone (locks/src/hold_timer.h: the watchdogs of Redlock, the fair Redis mutex
// and the Redis client, and the expiry threads of the Redis client and the hold table), without
// a server: it sleeps until the time its pass returned, a hold due earlier wakes
// it at once, a hold due later costs no wake-up, a poke runs a pass, and stop() ends it. The
// scheduler is built with a long maximum sleep, so no pass runs unless the case under test
// causes it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "../../locks/src/hold_timer.h"
#include "eventually.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;
using locks_detail::HoldTimer;
using locks_detail::SteadyClock;
using locks_detail::SteadyTime;
using test::eventually;

// A pass that counts itself and asks to be run again at `next` (SteadyTime::max(): never).
struct CountingPass {
    std::atomic<int> runs{0};
    std::atomic<SteadyTime> next{SteadyTime::max()};
    HoldTimer::Pass pass() {
        return [this] {
            runs.fetch_add(1);
            return next.load();
        };
    }
};

TEST(HoldTimerTest, TheFirstPassRunsAtOnceAndTheNextWhenItSaidItWouldBeDue) {
    CountingPass p;
    const auto started = SteadyClock::now();
    p.next = started + 50ms;
    HoldTimer s(60s);
    s.start(p.pass());
    ASSERT_TRUE(eventually([&] { return p.runs.load() >= 1; }, 10s));
    p.next = SteadyTime::max();
    ASSERT_TRUE(eventually([&] { return p.runs.load() >= 2; }, 10s)) << "the pass due after 50 ms never ran";
    EXPECT_GE(SteadyClock::now() - started, 50ms);
    s.stop();
}

TEST(HoldTimerTest, AHoldDueBeforeThePlannedWakeUpWakesItAndALaterOneDoesNot) {
    CountingPass p;
    HoldTimer s(60s);
    s.start(p.pass());
    // After the first pass it sleeps: planned for 60 s (the pass said "never").
    ASSERT_TRUE(eventually([&] { return s.passes() == 1; }, 10s));
    s.hold_added(SteadyClock::now() + 120s);  // due after the planned wake-up: seen then
    std::this_thread::sleep_for(100ms);       // nothing else can wake it for 60 s
    EXPECT_EQ(p.runs.load(), 1) << "a hold due after the planned wake-up woke the watchdog";
    s.hold_added(SteadyClock::now());  // due now: a pass at once
    EXPECT_TRUE(eventually([&] { return p.runs.load() == 2; }, 10s)) << "a hold due now did not wake the watchdog";
    s.stop();
}

// A hold registered while a pass runs may have been missed by that pass (it took its snapshot of
// the holds before): one more pass runs right after, whatever the hold's due time. Forced: the
// first pass is held until the hold was added.
TEST(HoldTimerTest, AHoldAddedDuringAPassGetsAnotherPassAtOnce) {
    std::atomic<int> runs{0};
    std::atomic<bool> in_pass{false}, go{false};
    HoldTimer s(60s);
    s.start([&] {
        if (runs.fetch_add(1) == 0) {
            in_pass = true;
            while (!go.load()) std::this_thread::sleep_for(1ms);
        }
        return SteadyTime::max();
    });
    ASSERT_TRUE(eventually([&] { return in_pass.load(); }, 10s));
    s.hold_added(SteadyClock::now() + 120s);  // due long after any planned wake-up, but added mid-pass
    go = true;
    EXPECT_TRUE(eventually([&] { return s.passes() == 2; }, 10s)) << "the hold added during a pass was not looked at";
    s.stop();
}

TEST(HoldTimerTest, APokeRunsAPassAndStopEndsTheThread) {
    CountingPass p;
    HoldTimer s(60s);
    s.start(p.pass());
    ASSERT_TRUE(eventually([&] { return s.passes() == 1; }, 10s));
    s.poke();
    ASSERT_TRUE(eventually([&] { return p.runs.load() == 2; }, 10s));
    s.stop();
    const int after_stop = p.runs.load();
    s.poke();
    s.hold_added(SteadyClock::now());
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(p.runs.load(), after_stop) << "a pass ran after stop()";
    s.stop();  // idempotent
}

// The hold table's and the Redis client's timers start lazily and never wake on a period: a
// service whose holds have no due time (the in-memory backend) or that never holds runs no
// thread, and one with no hold due sleeps until woken.
TEST(HoldTimerTest, ALazyTimerRunsNoPassUntilAHoldIsAddedAndThenOnlyWhenDue) {
    CountingPass p;
    HoldTimer s(HoldTimer::kNoMaxSleep);
    s.start_lazily(p.pass());
    s.hold_added(SteadyTime::max());  // a hold with no due time starts nothing
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(p.runs.load(), 0) << "a lazy timer ran a pass before any hold was due";
    const auto added = SteadyClock::now();
    p.next = added + 50ms;
    s.hold_added(added + 50ms);  // starts the thread: its first pass runs at once
    ASSERT_TRUE(eventually([&] { return p.runs.load() >= 1; }, 10s));
    p.next = SteadyTime::max();
    ASSERT_TRUE(eventually([&] { return p.runs.load() >= 2; }, 10s)) << "the pass due after 50 ms never ran";
    EXPECT_GE(SteadyClock::now() - added, 50ms);
    std::this_thread::sleep_for(100ms);  // no period: nothing is due, nothing runs
    EXPECT_EQ(p.runs.load(), 2) << "a timer without a maximum sleep woke with nothing due";
    s.stop();
    s.hold_added(SteadyClock::now());
    s.poke();
    EXPECT_EQ(s.passes(), 2u) << "a stopped timer started again";
}

TEST(HoldTimerTest, ALazyTimerStoppedBeforeItsFirstHoldNeverStarts) {
    CountingPass p;
    HoldTimer s(HoldTimer::kNoMaxSleep);
    s.start_lazily(p.pass());
    s.stop();
    s.hold_added(SteadyClock::now());
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(p.runs.load(), 0);
}

}  // namespace
}  // namespace lockstep
