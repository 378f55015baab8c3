// The fair Redis mutex's grant on release (fair_lock_scripts.cpp): a release makes the head
// waiter the holder on the server and tells it its token, so the woken waiter runs no script;
// a waiter that gives up while its grant is in flight hands the lock on; a grant whose message
// is lost is found by the waiter's re-check, with a fresh token. Each race is forced with fault
// points (locks.fair.attempt / .leaving / .grant_message), never timed.
#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <string>
#include <thread>

#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/locks/lock_keys.h"
#include "lockstep/locks/redis_fair_lock_service.h"
#include "lockstep/locks/redis_lock_service.h"
#include "eventually.h"
#include "fair_test_support.h"
#include "test_servers.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string grant_prefix() { return fair_test_prefix("fairgrant"); }

// A grace long enough that no waiter re-checks on its own during a test (only a grant moves it),
// and a lease long enough that a hold nobody hands on would outlast the test's bounds.
RedisFairLockOptions no_recheck() {
    RedisFairLockOptions f;
    f.waiter_grace = 60s;
    return f;
}
LockOptions long_lease() {
    LockOptions o;
    o.lease = 60s;
    return o;
}

// The lock key's value: the holder's waiter id when its own script took the lock, "<waiter
// id>#<token>" when a release granted it.
std::optional<std::string> lock_value(RedisClient& raw, const std::string& prefix, const std::string& name) {
    return raw.get(LockKeys(prefix, name).stem() + ":fair");
}

struct Thrown : std::runtime_error {
    Thrown() : std::runtime_error("dropped by the test") {}
};

TEST(RedisFairGrant, AReleaseMakesTheHeadWaiterTheHolderAndTheWokenWaiterRunsNoScript) {
    LockServiceOptions o;
    o.prefix = grant_prefix();
    RedisFairLockService holder(servers().redis_options(), o, no_recheck());
    RedisFairLockService waiters(servers().redis_options(), o, no_recheck());
    RedisClient raw(servers().redis_options());
    auto a = holder.make_mutex("g", long_lease());
    a->lock();
    const FenceToken a_token = a->fence_token();
    // An uncontended acquire writes the waiter id alone (no token to format on the server).
    const auto a_value = lock_value(raw, o.prefix, "g");
    ASSERT_TRUE(a_value.has_value());
    EXPECT_EQ(a_value->find('#'), std::string::npos) << *a_value;

    // Two waiters of one service: the first tries then queues; the second finds the service
    // already listening on the name and joins the line in its first (only) script.
    std::atomic<FenceToken> t1{0}, t2{0};
    fault::Gate release_w1;  // W1 holds until the test lets it release
    std::thread w1([&] {
        auto m = waiters.make_mutex("g", long_lease());
        m->lock();
        t1 = m->fence_token();
        release_w1.action()();
        m->unlock();
    });
    ASSERT_TRUE(line_reaches(waiters, "g", 1));
    auto w2_scripts = std::make_shared<std::atomic<int>>(0);
    std::atomic<bool> w2_started{false};
    std::thread w2;
    {
        // Counts W2's scripts from its first one on (armed for W2's thread only).
        std::atomic<bool> go{false};
        w2 = std::thread([&] {
            while (!go.load()) std::this_thread::yield();
            w2_started = true;
            auto m = waiters.make_mutex("g", long_lease());
            m->lock();
            t2 = m->fence_token();
            m->unlock();
        });
        fault::ArmOptions only_w2;
        only_w2.only_thread = w2.get_id();
        auto counting = fault::arm("locks.fair.attempt", [w2_scripts] { w2_scripts->fetch_add(1); }, only_w2);
        go = true;
        ASSERT_TRUE(line_reaches(waiters, "g", 2));
        EXPECT_EQ(w2_scripts->load(), 1) << "with the name's room subscribed, the first attempt joins the line";

        // From here on, W1 runs no script until it holds: the release grants it the lock.
        fault::ArmOptions only_w1;
        only_w1.only_thread = w1.get_id();
        auto w1_scripts = std::make_shared<std::atomic<int>>(0);
        auto w1_counting = fault::arm("locks.fair.attempt", [w1_scripts] { w1_scripts->fetch_add(1); }, only_w1);
        a->unlock();
        ASSERT_TRUE(release_w1.wait_arrivals(1, 20s)) << "the head waiter was not granted the lock";
        EXPECT_EQ(w1_scripts->load(), 0) << "the granted waiter ran a script";
        EXPECT_GT(t1.load(), a_token);
        // The lock key names W1's attempt and the token it was told.
        const auto v = lock_value(raw, o.prefix, "g");
        ASSERT_TRUE(v.has_value());
        EXPECT_TRUE(v->ends_with("#" + std::to_string(t1.load()))) << *v;
        EXPECT_EQ(holder.queue_length("g"), 1);  // W2 still in line
        release_w1.open();                         // W1's release grants W2, in-process
        w1.join();
        w2.join();
        EXPECT_EQ(w2_scripts->load(), 1) << "W2 ran a script after queuing";
    }
    EXPECT_TRUE(w2_started.load());
    EXPECT_GT(t2.load(), t1.load());
    EXPECT_FALSE(lock_value(raw, o.prefix, "g").has_value()) << "the last release frees the lock";
    EXPECT_EQ(holder.queue_length("g"), 0);
}

TEST(RedisFairGrant, AWaiterThatGivesUpWhileItsGrantIsInFlightHandsTheLockOn) {
    LockServiceOptions o;
    o.prefix = grant_prefix();
    RedisFairLockService holder(servers().redis_options(), o, no_recheck());
    RedisFairLockService leaver(servers().redis_options(), o, no_recheck());
    RedisFairLockService next(servers().redis_options(), o, no_recheck());
    RedisClient raw(servers().redis_options());
    auto a = holder.make_mutex("l", long_lease());
    a->lock();

    fault::Gate at_leave;
    auto leaving = fault::arm("locks.fair.leaving", at_leave.action());
    std::atomic<int> gave_up{-1};
    std::thread w([&] {
        auto m = leaver.make_mutex("l", long_lease());  // a 60 s lease: nobody else may wait it out
        gave_up = m->try_lock_for(1s) ? 0 : 1;  // 1 s: room to queue first, even under TSan
        if (gave_up == 0) m->unlock();
    });
    ASSERT_TRUE(line_reaches(holder, "l", 1));
    std::atomic<bool> c_got{false};
    FenceToken c_token = 0;
    Clock::time_point opened;
    double c_ms = -1;
    std::thread c([&] {
        auto m = next.make_mutex("l", long_lease());
        if (m->try_lock_for(30s)) {
            c_ms = std::chrono::duration<double, std::milli>(Clock::now() - opened).count();
            c_token = m->fence_token();
            c_got = true;
            m->unlock();
        }
    });
    ASSERT_TRUE(line_reaches(holder, "l", 2));
    // W's deadline passes; it stops out of its room, just before its leave script.
    ASSERT_TRUE(at_leave.wait_arrivals(1, 20s));
    // The release grants W (still first in line on the server); its message is lost, so only
    // W's leave script can hand the lock on.
    auto drop = fault::arm("locks.fair.grant_message", [] { throw Thrown(); }, fault::ArmOptions{0, 1, {}});
    const FenceToken a_token = a->fence_token();
    a->unlock();
    // The release ran its grant before returning: W holds the lock on the server, C still waits.
    ASSERT_TRUE(lock_value(raw, o.prefix, "l").has_value());
    EXPECT_EQ(holder.queue_length("l"), 1);
    // W's message reached W's subscriber and was dropped (before C can be granted anything).
    ASSERT_TRUE(eventually([&] { return drop.acted() == 1; }, 20s));
    opened = Clock::now();
    at_leave.open();
    w.join();
    c.join();
    EXPECT_EQ(gave_up.load(), 1) << "W's try_lock_for should have timed out";
    EXPECT_TRUE(c_got.load()) << "the grant to the leaver was not handed on";
    EXPECT_LT(c_ms, 10'000.0) << "the next waiter waited for the leaver's lease";
    EXPECT_GT(c_token, a_token);
}

TEST(RedisFairGrant, AGrantWhoseMessageIsLostIsFoundByTheReCheckWithAFreshToken) {
    LockServiceOptions o;
    o.prefix = grant_prefix();
    RedisFairLockOptions f;
    // The waiter re-checks every 1.5 s. The test holds it at that re-check (so its place in line
    // is not refreshed) while it releases: the place must outlive that by far (1.5 s more).
    f.waiter_grace = 3s;
    RedisFairLockService holder(servers().redis_options(), o, f);
    RedisFairLockService waiter(servers().redis_options(), o, f);
    RedisClient raw(servers().redis_options());
    auto a = holder.make_mutex("m", long_lease());
    a->lock();
    std::atomic<FenceToken> w_token{0};
    std::optional<std::string> w_value;  // the lock key while W holds
    std::thread w([&] {
        auto m = waiter.make_mutex("m", long_lease());
        m->lock();
        w_token = m->fence_token();
        w_value = lock_value(raw, o.prefix, "m");
        m->unlock();
    });
    ASSERT_TRUE(line_reaches(holder, "m", 1));
    // Hold W at its next re-check, then release with W's grant message lost.
    fault::Gate recheck;
    fault::ArmOptions only_w;
    only_w.only_thread = w.get_id();
    auto held = fault::arm("locks.fair.attempt", recheck.action(), only_w);
    ASSERT_TRUE(recheck.wait_arrivals(1, 20s));
    auto drop = fault::arm("locks.fair.grant_message", [] { throw Thrown(); }, fault::ArmOptions{0, 1, {}});
    a->unlock();
    const auto granted = lock_value(raw, o.prefix, "m");
    ASSERT_TRUE(granted.has_value()) << "the release did not grant the waiter";
    const FenceToken grant_token = std::stoll(granted->substr(granted->rfind('#') + 1));
    ASSERT_TRUE(eventually([&] { return drop.acted() == 1; }, 20s)) << "the grant's message was not dropped";
    recheck.open();  // W's re-check finds the lock its own
    w.join();
    EXPECT_GT(w_token.load(), grant_token) << "the re-check must draw a fresh token, not re-read the grant's";
    // The value changed from the grant's "<id>#<token>" to the id alone: the grant's message, had
    // it come late, undoes only that exact value (the leave script), so it cannot end W's hold.
    ASSERT_TRUE(w_value.has_value());
    EXPECT_EQ(*w_value, granted->substr(0, granted->rfind('#')));
    // The counter is shared with RedisMutex of the name: its next token is above both.
    RedisLockService barging(servers().redis_options(), o);
    auto b = barging.make_mutex("m");
    b->lock();
    EXPECT_GT(b->fence_token(), w_token.load());
    b->unlock();
}

// A lock freed without a release (its holder's lease ran out unrenewed; here the test deletes
// the key, as the expiry would) with an older live waiter X at the head: X takes it at its own
// re-check. A waiter Y behind X that re-checks meanwhile must wait for X's place in line to
// expire, not re-run its script every millisecond (it did: the script's wait hint was the free
// lock's TTL, 0, raised to 1 ms). X is held at its re-check by the test, so the window is forced.
TEST(RedisFairGrant, AFreeLockWhoseHeadIsAnotherWaiterDoesNotMakeTheOthersPoll) {
    LockServiceOptions o;
    o.prefix = grant_prefix();
    RedisFairLockOptions f;
    f.waiter_grace = 4s;  // re-checks every 2 s; a place in line lives 4 s
    RedisFairLockService holder(servers().redis_options(), o, f);
    RedisFairLockService xs(servers().redis_options(), o, f);
    RedisFairLockService ys(servers().redis_options(), o, f);
    RedisClient raw(servers().redis_options());
    auto a = holder.make_mutex("p", long_lease());
    a->lock();
    fault::Gate x_recheck;
    std::atomic<int> y_scripts{0};
    std::atomic<std::thread::id> x_id{}, y_id{};
    auto armed = fault::arm("locks.fair.attempt", [&, pass = x_recheck.action()] {
        const auto me = std::this_thread::get_id();
        if (me == y_id.load()) y_scripts.fetch_add(1);
        if (me == x_id.load()) pass();
    });
    std::thread x([&] {
        auto m = xs.make_mutex("p", long_lease());
        m->lock();
        m->unlock();
    });
    ASSERT_TRUE(line_reaches(holder, "p", 1));
    x_id = x.get_id();  // from here on, X's next script (its re-check) waits at the gate
    std::thread y([&] {
        auto m = ys.make_mutex("p", long_lease());
        m->lock();
        m->unlock();
    });
    ASSERT_TRUE(line_reaches(holder, "p", 2));
    y_id = y.get_id();
    ASSERT_EQ(raw.del({LockKeys(o.prefix, "p").stem() + ":fair"}), 1);  // A's lease "ran out"
    ASSERT_TRUE(x_recheck.wait_arrivals(1, 20s)) << "X never re-checked";
    // Both timers were set for the same re-check; give Y's that moment, then count.
    ASSERT_TRUE(eventually([&] { return y_scripts.load() >= 1; }, 20s)) << "Y never re-checked";
    const int before = y_scripts.load();
    std::this_thread::sleep_for(300ms);  // the window: a 1 ms poll runs ~300 scripts in it
    const int in_window = y_scripts.load() - before;
    EXPECT_LE(in_window, 1) << "Y polled a free lock that an older live waiter is due to take";
    x_recheck.open();
    x.join();
    y.join();
    armed.disarm();
    a->unlock();  // its hold was taken from it (the key deleted): reported, not thrown
}

// An attempt whose script took the lock but whose reply never arrived (a read timeout, a dropped
// connection) fails with that error; the lock must not stay held by it, unrenewed, for a whole
// lease (60 s here): the service runs the leave script, which gives up a hold that is this
// attempt's. Forced at the fault point after the script, which throws as a lost reply would.
// First a plain try (the lock free, nobody waiting), then a queued waiter whose re-check takes a
// lock freed without a release.
TEST(RedisFairGrant, AnAttemptWhoseReplyIsLostLeavesNoHoldBehind) {
    LockServiceOptions o;
    o.prefix = grant_prefix();
    RedisFairLockOptions f;
    f.waiter_grace = 2s;  // a queued waiter re-checks after 1 s
    RedisFairLockService holder(servers().redis_options(), o, f);
    RedisFairLockService waiter(servers().redis_options(), o, f);
    RedisClient raw(servers().redis_options());
    const auto reply_lost = [] { throw ConnectionError("the script's reply was lost (forced by the test)"); };

    auto t = holder.make_mutex("t", long_lease());
    {
        auto lost = fault::arm("locks.fair.after_attempt", reply_lost, fault::ArmOptions{0, 1, {}});
        EXPECT_THROW(t->try_lock(), ConnectionError);
        EXPECT_EQ(lost.acted(), 1);
    }
    EXPECT_FALSE(lock_value(raw, o.prefix, "t").has_value()) << "the lost try's hold stayed for its lease";
    auto t2 = waiter.make_mutex("t");
    if (t2->try_lock()) {
        t2->unlock();
    } else {
        ADD_FAILURE() << "the name is still held by the try whose reply was lost";
    }

    auto a = holder.make_mutex("q", long_lease());
    a->lock();
    std::atomic<bool> threw{false};
    std::thread w([&] {
        auto m = waiter.make_mutex("q", long_lease());
        try {
            m->lock();
            m->unlock();
        } catch (const ConnectionError&) {
            threw = true;
        }
    });
    ASSERT_TRUE(line_reaches(holder, "q", 1));
    fault::Gate recheck;
    fault::ArmOptions only_w;
    only_w.only_thread = w.get_id();
    auto held = fault::arm("locks.fair.attempt", recheck.action(), only_w);
    ASSERT_TRUE(recheck.wait_arrivals(1, 20s)) << "W never re-checked";
    fault::ArmOptions only_w_once = only_w;
    only_w_once.times = 1;
    auto lost = fault::arm("locks.fair.after_attempt", reply_lost, only_w_once);
    ASSERT_EQ(raw.del({LockKeys(o.prefix, "q").stem() + ":fair"}), 1);  // A's lease "ran out"
    recheck.open();  // W's re-check takes the free lock; its reply is lost
    w.join();
    EXPECT_EQ(lost.acted(), 1);
    EXPECT_TRUE(threw.load()) << "W's lock() should have failed with the lost reply's error";
    EXPECT_FALSE(lock_value(raw, o.prefix, "q").has_value()) << "the lost re-check's hold stayed for its lease";
    EXPECT_EQ(holder.queue_length("q"), 0);
    held.disarm();
    a->unlock();  // its hold was taken from it (the key deleted): reported, not thrown
}

// The watchdog drops a room (the per-name subscription of this service) after it has been idle
// for 2 s. A message that reaches the room's callback after the room left the map but before its
// subscription ended must find the room alive: the room was freed first (and its mutex unlocked
// after the free), a use after free the sanitizer legs would report here.
TEST(RedisFairGrant, AMessageForADroppedRoomFindsItAliveUntilItsSubscriptionEnds) {
    LockServiceOptions o;
    o.prefix = grant_prefix();
    RedisFairLockService holder(servers().redis_options(), o, no_recheck());
    RedisFairLockService waiter(servers().redis_options(), o, no_recheck());
    RedisClient raw(servers().redis_options());
    auto a = holder.make_mutex("d", long_lease());
    a->lock();
    fault::Gate holding;
    std::thread w([&] {
        auto m = waiter.make_mutex("d", long_lease());
        m->lock();
        holding.action()();
        m->unlock();
    });
    ASSERT_TRUE(line_reaches(holder, "d", 1));
    a->unlock();  // grants W: `waiter` has a room for "d"
    ASSERT_TRUE(holding.wait_arrivals(1, 20s));
    const auto v = lock_value(raw, o.prefix, "d");
    ASSERT_TRUE(v.has_value());
    const std::string id = v->substr(0, v->find('#'));  // "<service id>:<thread>:w<n>:<lease>"
    const std::string channel = LockKeys(o.prefix, "d").stem() + ":fair:ch:" + id.substr(0, id.find(':'));
    holding.open();
    w.join();
    std::atomic<int> delivered{0};
    auto counting = fault::arm("locks.fair.grant_message", [&] { delivered.fetch_add(1); });
    std::atomic<int> subscribers{-1};
    std::atomic<bool> seen{false}, finished{false};
    auto at_drop = fault::arm(
        "locks.wait_rooms.dropped",
        [&] {
            // On the watchdog's thread, between the room's removal and its unsubscribe. The
            // message names a waiter of this service that is not there (an orphan grant).
            subscribers = static_cast<int>(raw.publish(channel, id + " 1"));
            seen = eventually([&] { return delivered.load() >= 1; }, 10s);
            finished = true;
        },
        fault::ArmOptions{0, 1, {}});
    ASSERT_TRUE(eventually([&] { return finished.load(); }, 20s)) << "the idle room was not dropped";
    EXPECT_EQ(subscribers.load(), 1) << "the dropped room's subscription had already ended";
    EXPECT_TRUE(seen.load()) << "the message did not reach the room's callback";
}


// RACES L12: a grant travels by message while the server's lease runs from the release. The
// waiter is held between the grant's arrival and its lock() returning (locks.fair.before_confirm)
// until the grant's lease has run out on the server and a thief has taken the lock: counting from
// the arrival, the waiter would now believe it holds beside the thief. It confirms the grant with
// a renewal first, finds the lock someone else's, and queues again: one holder at any instant.
TEST(RedisFairGrant, L12_AGrantWhoseLeaseRanOutInFlightIsNotAHold) {
    LockServiceOptions o;
    o.prefix = grant_prefix();
    RedisFairLockService holder(servers().redis_options(), o, no_recheck());
    RedisFairLockService waiter(servers().redis_options(), o, no_recheck());
    RedisFairLockService thief(servers().redis_options(), o, no_recheck());
    RedisClient raw(servers().redis_options());
    LockOptions short_lease;
    short_lease.lease = 400ms;
    auto a = holder.make_mutex("late-grant", short_lease);
    a->lock();

    fault::Gate in_flight;
    auto armed = fault::arm("locks.fair.before_confirm", in_flight.action());
    std::atomic<bool> w_holds{false};
    std::atomic<bool> c_holds{false};
    std::atomic<bool> overlap{false};
    std::thread w([&] {
        auto m = waiter.make_mutex("late-grant", short_lease);
        ASSERT_TRUE(m->try_lock_for(20s));
        w_holds = true;
        if (c_holds.load()) overlap = true;
        w_holds = false;
        m->unlock();
    });
    ASSERT_TRUE(line_reaches(holder, "late-grant", 1));
    a->unlock();  // grants the lock to W: its lease (400 ms) runs on the server from now
    ASSERT_TRUE(in_flight.wait_arrivals(1, 10s)) << "the grant never reached the waiter";
    // The grant's lease runs out on the server while the waiter has not confirmed it.
    ASSERT_TRUE(eventually([&] { return !lock_value(raw, o.prefix, "late-grant").has_value(); }, 5s));
    auto c = thief.make_mutex("late-grant", LockOptions{.lease = 60s});
    ASSERT_TRUE(c->try_lock()) << "the expired grant still held the lock on the server";
    c_holds = true;
    in_flight.open();  // the late grant reaches lock()'s end now
    // W must not hold while C does: it queues again behind C. (Counting from the grant's arrival,
    // it would return from lock() at once, with C holding: `overlap`.)
    std::this_thread::sleep_for(300ms);
    c_holds = false;
    c->unlock();
    w.join();
    EXPECT_FALSE(overlap.load()) << "the waiter believed it held beside the thief (L12)";
}

}  // namespace
}  // namespace lockstep::test
