// The hand-off (LockClientOptions::handoff_window / handoff_after): a release
// that wakes a waiter reserves the lock for it, so a barging acquirer cannot take it back, and a
// woken waiter that never comes blocks the lock for at most the window. Forced: the woken waiter
// is held at the fault point between its wake-up and its try (locks.wait.after_sleep), and the
// waiters' own re-check (claim_refresh) is set far beyond the test so only a message or the
// window's TTL can move them. The releasing client's options decide the window (its release
// script writes the reservation).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "../../locks/redis/src/lock_scripts.h"  // to send the leave script as a giving-up waiter does
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

using test::eventually;

LockClientOptions holder_options(std::chrono::milliseconds window) {
    LockClientOptions o;
    o.handoff_window = window;
    o.handoff_after = 0ms;
    return o;
}

// A waiter that only a release message (or a TTL it was told about) wakes, and whose queue
// entry outlives the test.
LockClientOptions waiter_options() {
    LockClientOptions o;
    o.claim_refresh = 60000ms;
    o.waiter_grace = 60000ms;
    return o;
}

class HandOffTest : public ::testing::Test {
protected:
    void SetUp() override { prefix_ = test::unique_lock_prefix(); }

    // Starts `m.lock()` on a thread that stops at locks.wait.after_sleep (after its wake-up,
    // before its next try) and returns once it sleeps in the queue.
    std::thread start_paused_waiter(RedisMutex& m, const fault::Gate& woken, std::atomic<bool>& acquired,
                                    std::atomic<FenceToken>& token) {
        fault::Gate queued_gate(0ms);  // never blocks: counts the arrival at before_sleep
        queued_gate.open();
        std::thread t([&, woken, queued_gate] {
            auto after = fault::arm("locks.wait.after_sleep", woken.action(),
                                    {.only_thread = std::this_thread::get_id()});
            auto before = fault::arm("locks.wait.before_sleep", queued_gate.action(),
                                     {.only_thread = std::this_thread::get_id()});
            m.lock();
            token = m.fence_token();
            acquired = true;
            m.unlock();
        });
        EXPECT_TRUE(queued_gate.wait_arrivals(1, 10s)) << "the waiter never queued";
        return t;
    }

    std::string prefix_;
};

TEST_F(HandOffTest, TheWokenWaiterGetsTheLockEvenWhenBargersTryDuringItsWindow) {
    // 20 s window: it cannot run out while the test holds the waiter, however loaded the machine.
    LockProcess holder_p(prefix_, holder_options(20000ms));
    LockProcess waiter_p(prefix_, waiter_options());
    LockProcess barger_p(prefix_);
    RedisMutex holder(*holder_p.locks, "handoff", {.lease = 30000ms});
    RedisMutex waiter(*waiter_p.locks, "handoff", {.lease = 30000ms});
    RedisMutex barger(*barger_p.locks, "handoff", {.lease = 30000ms});
    holder.lock();
    const FenceToken holder_token = holder.fence_token();

    fault::Gate woken;
    std::atomic<bool> acquired{false};
    std::atomic<FenceToken> token{0};
    std::thread w = start_paused_waiter(waiter, woken, acquired, token);

    holder.unlock();
    // The release woke the waiter by message (its re-check is a minute away) ...
    ASSERT_TRUE(woken.wait_arrivals(1, 10s));
    // ... and reserved the lock for it: the key holds only the reservation, with the window's TTL.
    auto& raw = *holder_p.redis;
    auto fields = raw.command({"HKEYS", holder.keys().mutex()});
    ASSERT_EQ(fields.elements().size(), 1u);
    EXPECT_EQ(fields.elements()[0].str(), "~");
    const long long pttl = raw.command({"PTTL", holder.keys().mutex()}).integer();
    EXPECT_GT(pttl, 0);
    EXPECT_LE(pttl, 20000);

    // Bargers during the window: the releasing thread itself, another client's plain try, and a
    // waiting try that queues behind and gives up. None gets it.
    EXPECT_FALSE(holder.try_lock());
    EXPECT_FALSE(barger.try_lock());
    EXPECT_FALSE(barger.try_lock_for(200ms));
    EXPECT_FALSE(acquired.load());

    const auto attempts_before = waiter_p.locks->stats().acquire_attempts;
    woken.open();
    w.join();
    EXPECT_TRUE(acquired.load());
    EXPECT_GT(token.load(), holder_token);
    // The woken waiter took its reservation with the one script it sends anyway.
    EXPECT_EQ(waiter_p.locks->stats().acquire_attempts - attempts_before, 1u);
    // Nothing left behind: the waiter released, the barger's queue entry is gone.
    EXPECT_EQ(raw.command({"EXISTS", holder.keys().mutex()}).integer(), 0);
    EXPECT_EQ(raw.command({"ZCARD", holder.keys().mutex_queue()}).integer(), 0);
}

TEST_F(HandOffTest, AWokenWaiterThatFreezesBlocksTheLockForAtMostItsWindow) {
    LockProcess holder_p(prefix_, holder_options(300ms));
    LockProcess waiter_p(prefix_, waiter_options());
    LockProcess other_p(prefix_, waiter_options());
    RedisMutex holder(*holder_p.locks, "frozen", {.lease = 30000ms});
    RedisMutex waiter(*waiter_p.locks, "frozen", {.lease = 30000ms});
    RedisMutex other(*other_p.locks, "frozen", {.lease = 30000ms});
    holder.lock();

    fault::Gate woken(60000ms);
    std::atomic<bool> acquired{false};
    std::atomic<FenceToken> token{0};
    std::thread w = start_paused_waiter(waiter, woken, acquired, token);

    holder.unlock();
    ASSERT_TRUE(woken.wait_arrivals(1, 10s));  // woken, and now frozen before its try
    const long long pttl = holder_p.redis->command({"PTTL", holder.keys().mutex()}).integer();
    EXPECT_LE(pttl, 300) << "the reservation lives at most the window";

    // Another client's waiter, whose own re-check is a minute away, gets the lock while the woken
    // waiter is still frozen: the busy answer told it the window's TTL, and after it the lock is
    // free. Without the bound it would wait its claim_refresh (60 s) or for ever.
    const auto t0 = Clock::now();
    ASSERT_TRUE(other.try_lock_for(20s));
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
    EXPECT_FALSE(acquired.load());
    EXPECT_LT(waited, 20s);
    std::cout << "[ measure  ] frozen woken waiter: the next acquirer waited " << waited.count() << " ms\n";

    // The frozen waiter resumes, finds the lock held, and keeps its place: the next release
    // wakes it first and reserves for it again.
    woken.open();
    ASSERT_TRUE(eventually(
        [&] { return holder_p.redis->command({"ZCARD", holder.keys().mutex_queue()}).integer() == 1; }, 10s));
    other.unlock();
    w.join();
    EXPECT_TRUE(acquired.load());
}

TEST_F(HandOffTest, WithoutAWindowOrBeforeHandOffAfterTheReleaseLeavesTheLockFree) {
    LockClientOptions off = holder_options(0ms);
    LockClientOptions late = holder_options(20000ms);
    late.handoff_after = 600000ms;  // no waiter here waits that long
    for (const LockClientOptions& options : {off, late}) {
        LockProcess holder_p(prefix_, options);
        LockProcess waiter_p(prefix_, waiter_options());
        RedisMutex holder(*holder_p.locks, "barging", {.lease = 30000ms});
        RedisMutex waiter(*waiter_p.locks, "barging", {.lease = 30000ms});
        holder.lock();
        fault::Gate woken;
        std::atomic<bool> acquired{false};
        std::atomic<FenceToken> token{0};
        std::thread w = start_paused_waiter(waiter, woken, acquired, token);
        holder.unlock();
        ASSERT_TRUE(woken.wait_arrivals(1, 10s));  // the waiter was still woken (L7) ...
        EXPECT_EQ(holder_p.redis->command({"EXISTS", holder.keys().mutex()}).integer(), 0);  // ... no reservation
        EXPECT_TRUE(holder.try_lock());  // so a barging try wins
        holder.unlock();
        woken.open();
        w.join();
        EXPECT_TRUE(acquired.load());
    }
}

TEST_F(HandOffTest, AWokenWaiterThatGivesUpInsideItsWindowGivesTheReservationBack) {
    LockProcess p(prefix_);
    RedisMutex m(*p.locks, "giveup", {.lease = 30000ms});
    const LockKeys& k = m.keys();
    auto& raw = *p.redis;
    const std::string keys_owner = "nobody:w1";
    // The state a release leaves: the lock reserved for waiter 'nobody:w1' for 20 s.
    raw.command({"HSET", k.mutex(), "~", keys_owner});
    raw.command({"PEXPIRE", k.mutex(), "20000"});
    EXPECT_FALSE(m.try_lock());  // reserved: busy for everyone else
    // Another waiter leaving changes nothing ...
    raw.eval(lock_scripts::mutex_leave_queue(), {k.mutex(), k.mutex_queue(), k.mutex_queue_expiry()},
             {"nobody:w2", "100", "0"});
    EXPECT_EQ(raw.command({"HGET", k.mutex(), "~"}).str(), keys_owner);
    // ... the reserved one leaving frees the lock at once, not after the 20 s window.
    raw.eval(lock_scripts::mutex_leave_queue(), {k.mutex(), k.mutex_queue(), k.mutex_queue_expiry()},
             {keys_owner, "100", "0"});
    EXPECT_EQ(raw.command({"EXISTS", k.mutex()}).integer(), 0);
    EXPECT_TRUE(m.try_lock());
    m.unlock();
}

TEST_F(HandOffTest, NegativeHandOffDurationsAreConfigErrors) {
    LockClientOptions o;
    o.handoff_window = -1ms;
    EXPECT_THROW(LockProcess(prefix_, o), ConfigError);
    o = {};
    o.handoff_after = -1ms;
    EXPECT_THROW(LockProcess(prefix_, o), ConfigError);
    o = {};
    o.local_handoff_after = std::chrono::microseconds(-1);
    EXPECT_THROW(LockProcess(prefix_, o), ConfigError);
}

}  // namespace
}  // namespace lockstep
