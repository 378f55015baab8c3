// The watchdog scheduler alone (locks/src/renewal_scheduler.h, used by Redlock and the fair Redis
// mutex), without a server: it sleeps until the time its pass returned, a hold due earlier wakes
// it at once, a hold due later costs no wake-up, a poke runs a pass, and stop() ends it. The
// scheduler is built with a long maximum sleep, so no pass runs unless the case under test
// causes it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "../../locks/src/renewal_scheduler.h"
#include "eventually.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;
using locks_detail::RenewalScheduler;
using locks_detail::SteadyClock;
using locks_detail::SteadyTime;
using test::eventually;

// A pass that counts itself and asks to be run again at `next` (SteadyTime::max(): never).
struct CountingPass {
    std::atomic<int> runs{0};
    std::atomic<SteadyTime> next{SteadyTime::max()};
    RenewalScheduler::Pass pass() {
        return [this] {
            runs.fetch_add(1);
            return next.load();
        };
    }
};

TEST(RenewalSchedulerTest, TheFirstPassRunsAtOnceAndTheNextWhenItSaidItWouldBeDue) {
    CountingPass p;
    const auto started = SteadyClock::now();
    p.next = started + 50ms;
    RenewalScheduler s(60s);
    s.start(p.pass());
    ASSERT_TRUE(eventually([&] { return p.runs.load() >= 1; }, 10s));
    p.next = SteadyTime::max();
    ASSERT_TRUE(eventually([&] { return p.runs.load() >= 2; }, 10s)) << "the pass due after 50 ms never ran";
    EXPECT_GE(SteadyClock::now() - started, 50ms);
    s.stop();
}

TEST(RenewalSchedulerTest, AHoldDueBeforeThePlannedWakeUpWakesItAndALaterOneDoesNot) {
    CountingPass p;
    RenewalScheduler s(60s);
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
TEST(RenewalSchedulerTest, AHoldAddedDuringAPassGetsAnotherPassAtOnce) {
    std::atomic<int> runs{0};
    std::atomic<bool> in_pass{false}, go{false};
    RenewalScheduler s(60s);
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

TEST(RenewalSchedulerTest, APokeRunsAPassAndStopEndsTheThread) {
    CountingPass p;
    RenewalScheduler s(60s);
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

}  // namespace
}  // namespace lockstep
