// The ZooKeeper service across a session replacement, forced at each risky step. The stall seen
// once under TSan (two forced expiries 80 ms apart, then neither an expiry report nor a new
// session for 60 s) had two causes, one test each:
//   - loss callbacks ran on libzookeeper's event thread, and the thread that replaced the
//     session closed the old handle, which joins that thread: a callback that blocked stalled
//     the replacement, and one that took a lock of the service deadlocked with it (the replacer
//     holds replace_mu, the callback's lock() waits for it). Now a reporter thread runs them.
//   - expire_session() during a replacement read no session (returned, ending nothing) or the
//     new session's client id before its handshake (0: every attach opened a fresh session and
//     ended nothing, for the whole 60 s). Now it waits for the new session to connect.
// A hang here must fail the test, not ctest's 900 s timeout: every step that could block runs on
// a thread the test waits for within a bound, and a thread still stuck then ends the binary.
#include <gtest/gtest.h>

#ifdef LOCKSTEP_HAVE_ZOOKEEPER
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "backends.h"
#include "eventually.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/locks/lock_errors.h"
#include "lockstep/locks/zookeeper_lock_service.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

// A deadlocked thread cannot be joined, and a test that waits for it hangs ctest: say what hung
// and end the binary (ctest reports the entry failed).
[[noreturn]] void hang(const std::string& what) {
    std::fprintf(stderr, "[  HANG    ] %s\n", what.c_str());
    std::fflush(stderr);
    std::_Exit(1);
}

// A step that may block, on its own thread; finish() waits for it within a bound.
class Bounded {
public:
    Bounded(std::string what, std::function<void()> body)
        : what_(std::move(what)), done_(std::make_shared<std::atomic<bool>>(false)) {
        t_ = std::thread([body = std::move(body), done = done_, what = what_] {
            try {
                body();
            } catch (const std::exception& e) {
                ADD_FAILURE() << what << " threw: " << e.what();
            }
            done->store(true);
        });
    }
    void finish(std::chrono::milliseconds bound) {
        if (!eventually([&] { return done_->load(); }, bound, 2ms)) hang(what_ + ": still running after " + std::to_string(bound.count()) + " ms");
        t_.join();
    }
    ~Bounded() {
        if (t_.joinable()) finish(60s);
    }

private:
    std::string what_;
    std::shared_ptr<std::atomic<bool>> done_;
    std::thread t_;
};

// Loss reports per lock name (the service's on_lost).
struct Losses {
    std::mutex m;
    std::map<std::string, int> by_name;
    void add(const LockLoss& l) {
        std::lock_guard g(m);
        ++by_name[l.name];
    }
    int of(const std::string& name) {
        std::lock_guard g(m);
        return by_name[name];
    }
};

ZooKeeperLockOptions zk_options() { return parse_zookeeper_url(backend_url("zookeeper")); }

// (a) + (b, report in flight): a hold's loss callback blocks, and later takes another lock of
// the same service. While it blocks, another thread must still get a new session and a lock,
// and a second expiry (of that new session) must queue behind the blocked report, not vanish.
TEST(ZooKeeperReplacement, ALossCallbackThatBlocksOrLocksDoesNotStallTheService) {
    Losses losses;
    LockServiceOptions so;
    so.prefix = "cbstall:";
    so.on_lost = [&](const LockLoss& l) { losses.add(l); };
    ZooKeeperLockService s(zk_options(), so);

    fault::Gate in_callback(60s);
    std::atomic<int> callback_runs{0};
    std::atomic<bool> inner_ok{false};
    LockOptions lo;
    lo.on_lost = [&](const LockLoss&) {
        callback_runs.fetch_add(1);
        in_callback.action()();  // blocks until the test opens it
        auto inner = s.make_mutex("inner");  // a lock of the same service, from the callback
        if (inner->try_lock_for(10s)) {
            inner_ok = true;
            inner->unlock();
        }
    };
    auto held = s.make_mutex("held", lo);
    held->lock();

    Bounded first("the first expire_session", [&] { s.expire_session(); });
    ASSERT_TRUE(in_callback.wait_arrivals(1, 20s)) << "the loss of 'held' was not reported";

    // The callback blocks. Another thread takes a lock: it must replace the session now.
    std::atomic<bool> other_held{false}, release_other{false}, other_lost{false}, other_threw{false};
    Bounded other_holder("a lock taken while a loss callback blocks", [&] {
        auto other = s.make_mutex("other");
        if (!other->try_lock_for(10s)) return;
        other_held = true;
        while (!release_other) std::this_thread::sleep_for(1ms);
        other_lost = other->lost();
        try {
            other->unlock_checked();
        } catch (const LockLostError&) {
            other_threw = true;
        }
    });
    if (!eventually([&] { return other_held.load(); }, 15s)) {
        hang("no new session and no lock while a loss callback blocks (the replacer waits for the callback)");
    }
    EXPECT_EQ(s.stats().sessions, 2u);

    // A second expiry while the first report is still running: the new session ends too.
    Bounded second("the second expire_session", [&] { s.expire_session(); });
    ASSERT_TRUE(eventually([&] { return s.stats().expiries == 2; }, 30s)) << "the second expiry was not seen";
    // Its queued report waits behind the blocked one; only the end of its validity (last heard +
    // T, L11) reports it sooner, on the expiry thread. The count is read first, so a validity
    // still running after the read means it was running at the read.
    const int other_losses = losses.of("other");
    if (std::chrono::steady_clock::now() < s.last_heard() + s.session_timeout() - s.session_timeout() / 100 - 2ms) {
        EXPECT_EQ(other_losses, 0) << "reported before the blocked report ahead of it ran";
    }

    in_callback.open();
    first.finish(30s);
    second.finish(30s);
    release_other = true;
    other_holder.finish(20s);

    EXPECT_EQ(callback_runs.load(), 1);
    EXPECT_TRUE(inner_ok.load()) << "a loss callback could not take another lock of its service";
    EXPECT_EQ(losses.of("held"), 1);
    EXPECT_EQ(losses.of("other"), 1);
    EXPECT_EQ(losses.of("inner"), 0);
    EXPECT_TRUE(other_lost.load());
    EXPECT_TRUE(other_threw.load());
    EXPECT_TRUE(held->lost());
    EXPECT_THROW(held->unlock_checked(), LockLostError);
    Bounded after("a lock after both expiries", [&] {
        auto m = s.make_mutex("after");
        EXPECT_TRUE(m->try_lock_for(10s));
        m->unlock();
    });
    after.finish(20s);
    EXPECT_EQ(s.stats().sessions, 3u);
    EXPECT_EQ(s.stats().losses, 2u);
}

// (b, replacement in flight): the first expiry's replacement is paused with no handle (fault
// point locks.zookeeper.replacing) when a second expiry is asked for. It must end the session
// being opened, once it is connected — not return at once, and not attach with the new
// session's id read before its handshake (0: a fresh session, nothing ends).
TEST(ZooKeeperReplacement, ASecondExpiryDuringTheReplacementEndsTheNewSession) {
    Losses losses;
    LockServiceOptions so;
    so.prefix = "twoexp:";
    so.on_lost = [&](const LockLoss& l) { losses.add(l); };
    ZooKeeperLockService s(zk_options(), so);
    auto first = s.make_mutex("first");
    first->lock();

    fault::Gate replacing(60s);
    auto armed = fault::arm("locks.zookeeper.replacing", replacing.action(), {.times = 1});
    Bounded("the first expire_session", [&] { s.expire_session(); }).finish(40s);
    EXPECT_EQ(losses.of("first"), 1);

    std::atomic<bool> got{false}, done_holding{false}, release{false}, second_lost{false}, second_threw{false};
    Bounded replacer("a lock that replaces the session", [&] {
        auto second = s.make_mutex("second");
        got = second->try_lock_for(30s);
        done_holding = true;
        if (!got) return;
        while (!release) std::this_thread::sleep_for(1ms);
        second_lost = second->lost();
        try {
            second->unlock_checked();
        } catch (const LockLostError&) {
            second_threw = true;
        }
    });
    if (!replacing.wait_arrivals(1, 20s)) {
        release = true;
        replacing.open();
        FAIL() << "the replacement did not start";
    }
    Bounded second_expiry("the second expire_session", [&] { s.expire_session(); });
    replacing.open();
    second_expiry.finish(40s);
    // (An attach with the empty id of a session not yet connected ends nothing however often it
    // is tried: then this is 1. Not asserted: forced_expiry_retries, since one attempt in a few
    // ends nothing for the benign reason expire_session() describes, and is retried.)
    EXPECT_EQ(s.stats().expiries, 2u) << "the second expire_session ended nothing";

    ASSERT_TRUE(eventually([&] { return done_holding.load(); }, 20s));
    release = true;
    replacer.finish(20s);
    EXPECT_TRUE(got.load());
    // Its hold was taken either in the second session (then lost with it, reported once) or,
    // when the expiry came first, in the third (not lost).
    EXPECT_EQ(losses.of("second"), second_lost ? 1 : 0);
    EXPECT_EQ(second_threw.load(), second_lost.load());
    EXPECT_EQ(losses.of("first"), 1);
    Bounded after("a lock after both expiries", [&] {
        auto m = s.make_mutex("after");
        EXPECT_TRUE(m->try_lock_for(10s));
        m->unlock();
    });
    after.finish(20s);
    EXPECT_EQ(s.stats().sessions, 3u);
}

// (c): a waiter paused with the first session's handle (fault point locks.zookeeper.after_handle)
// while a loss callback replaces the session by taking a lock. The old handle stays open under
// the paused call (never closed by the replacer, never on the client's event thread, where no
// user code runs now); the waiter's call fails on the expired session, it closes the handle as
// its last user and queues again in the new session.
TEST(ZooKeeperReplacement, AHandleInUseSurvivesACallbackThatReplacesTheSession) {
    LockServiceOptions so;
    so.prefix = "cbhandle:";
    ZooKeeperLockService s(zk_options(), so);
    std::atomic<bool> inner_ok{false};
    std::atomic<long long> closed_in_callback{-1};
    LockOptions lo;
    lo.on_lost = [&](const LockLoss&) {
        auto inner = s.make_mutex("inner");
        if (inner->try_lock_for(10s)) {
            inner_ok = true;
            inner->unlock();
        }
        closed_in_callback = static_cast<long long>(s.stats().handles_closed);
    };
    auto held = s.make_mutex("held", lo);
    held->lock();

    fault::Gate picked_gate(60s);
    auto armed = fault::arm("locks.zookeeper.after_handle", picked_gate.action(), {.times = 1});
    std::atomic<bool> got{false};
    Bounded picker("a waiter paused with the old handle", [&] {
        auto picked = s.make_mutex("picked");
        got = picked->try_lock_for(30s);
        if (got) picked->unlock();
    });
    ASSERT_TRUE(picked_gate.wait_arrivals(1, 20s));
    Bounded("expire_session", [&] { s.expire_session(); }).finish(40s);
    EXPECT_TRUE(inner_ok.load()) << "the loss callback could not take a lock";
    EXPECT_EQ(closed_in_callback.load(), 0) << "the old handle was closed under the paused call";
    EXPECT_EQ(s.stats().sessions, 2u);
    picked_gate.open();
    picker.finish(40s);
    EXPECT_TRUE(got.load()) << "the paused waiter did not queue again in the new session";
    EXPECT_EQ(s.stats().handles_closed, 1u) << "the old handle was not closed by its last user";
    EXPECT_TRUE(held->lost());
    EXPECT_THROW(held->unlock_checked(), LockLostError);
}

}  // namespace
}  // namespace lockstep::test
#endif
