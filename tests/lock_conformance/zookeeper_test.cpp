// What only the ZooKeeper backend and its private server have to show: one release wakes one
// waiter (L9, counted in watch events), a client handle is never closed under a call on it, and
// the private server never outlives its owner.
#include <gtest/gtest.h>

#ifdef LOCKSTEP_HAVE_ZOOKEEPER
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <iostream>
#include <thread>

#ifndef THREADED
#define THREADED  // the C client's synchronous API
#endif
#include <zookeeper/zookeeper.h>

#include "backends.h"
#include "conformance_child.h"
#include "eventually.h"
#include "lockstep/core/error.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/locks/zookeeper_lock_service.h"
#include "lockstep/servers/fault_proxy.h"
#include "lockstep/servers/proxied_lock_service.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

TEST(ZooKeeperLock, OneReleaseWakesOneWaiter) {
    const std::string url = backend_url("zookeeper");
    LockServiceOptions o;
    o.prefix = "l9:";
    ZooKeeperLockService holder(parse_zookeeper_url(url), o);
    std::vector<std::unique_ptr<ZooKeeperLockService>> waiters;
    for (int i = 0; i < 3; ++i) waiters.push_back(std::make_unique<ZooKeeperLockService>(parse_zookeeper_url(url), o));
    auto m = holder.make_mutex("herd");
    m->lock();
    std::atomic<int> acquired{0};
    std::atomic<bool> release_all{false};
    std::atomic<int> watching{0};  // waiters queued with their watch set, about to wait
    auto armed = fault::arm("locks.zookeeper.watching", [&] { watching.fetch_add(1); });
    std::vector<std::thread> threads;
    for (auto& w : waiters) {
        threads.emplace_back([&, s = w.get()] {
            auto mine = s->make_mutex("herd");
            mine->lock();
            acquired.fetch_add(1);
            while (!release_all) std::this_thread::sleep_for(1ms);
            mine->unlock();
        });
    }
    // Every waiter has queued when each has set its one watch (on its predecessor).
    auto watches_fired = [&] {
        std::uint64_t n = 0;
        for (auto& w : waiters) n += w->stats().watches_fired;
        return n;
    };
    ASSERT_TRUE(eventually([&] { return watching.load() == 3; }, 20s)) << "not every waiter set its watch";
    EXPECT_EQ(watches_fired(), 0u);
    m->unlock();
    while (acquired.load() == 0) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(200ms);  // a herd would have woken the others by now
    EXPECT_EQ(acquired.load(), 1);
    EXPECT_EQ(watches_fired(), 1u) << "a release woke more than the next waiter";
    release_all = true;
    for (auto& t : threads) t.join();
    EXPECT_EQ(acquired.load(), 3);
}

// The client's host lookups (bench: a getaddrinfo at every I/O wake-up by default):
// the service asks for them only on reconnect unless told otherwise, and refuses a value
// libzookeeper would refuse, before it connects anywhere.
TEST(ZooKeeperLock, HostResolutionDelayIsOnReconnectByDefaultAndChecked) {
    EXPECT_EQ(ZooKeeperLockOptions{}.host_resolution_delay, -1ms);
    EXPECT_EQ(parse_zookeeper_url("zookeeper://127.0.0.1:1?host_resolution_delay_ms=250").host_resolution_delay, 250ms);
    EXPECT_THROW(parse_zookeeper_url("zookeeper://127.0.0.1:1?host_resolution_delay_ms=soon"), ConfigError);
    ZooKeeperLockOptions bad;
    bad.hosts = "127.0.0.1:1";  // nobody listens: the check must come before any connection attempt
    bad.host_resolution_delay = -2ms;
    EXPECT_THROW(ZooKeeperLockService{bad}, ConfigError);
    // And a service set so works: a lock cycle on the test server with lookups every 250 ms.
    auto zk = parse_zookeeper_url(backend_url("zookeeper"));
    zk.host_resolution_delay = 250ms;
    ZooKeeperLockService s(zk);
    auto m = s.make_mutex("resolution");
    m->lock();
    m->unlock();
}

TEST(ZooKeeperLock, SessionExpiryIsReportedAsLoss) {
    LockServiceOptions o;
    o.prefix = "exp:";
    std::atomic<int> losses{0};
    o.on_lost = [&](const LockLoss& l) {
        EXPECT_EQ(l.reason, LockLossReason::Expired);
        losses.fetch_add(1);
    };
    ZooKeeperLockService s(parse_zookeeper_url(backend_url("zookeeper")), o);
    auto m = s.make_mutex("a");
    auto rw = s.make_read_write_lock("b");
    m->lock();
    rw->lock_shared();
    s.expire_session();
    EXPECT_TRUE(m->lost());
    EXPECT_TRUE(rw->lost());
    EXPECT_EQ(losses.load(), 2);
    EXPECT_THROW(m->unlock_checked(), LockLostError);
    EXPECT_THROW(rw->unlock_shared_checked(), LockLostError);
    // The service opened a new session: locks work again.
    EXPECT_TRUE(m->try_lock());
    m->unlock();
    EXPECT_EQ(s.stats().sessions, 2u);
}

// A thread has picked the session's handle and is about to call on it (fault point
// locks.zookeeper.after_handle) when the session expires and another thread replaces it. The
// replacer drops the service's reference, but the handle stays open until the first thread's
// call on it is done (closing it then would be a use after free); that thread closes it and
// queues again in the new session.
TEST(ZooKeeperLock, AHandleInUseIsClosedByItsLastUserNotUnderIt) {
    LockServiceOptions o;
    o.prefix = "huse:";
    ZooKeeperLockService s(parse_zookeeper_url(backend_url("zookeeper")), o);
    auto picked = s.make_mutex("picked");
    fault::Gate gate;
    auto armed = fault::arm("locks.zookeeper.after_handle", gate.action(), {.times = 1});
    bool got = false;
    std::thread picker([&] {
        got = picked->try_lock_for(30s);
        if (got) picked->unlock();
    });
    ASSERT_TRUE(gate.wait_arrivals(1, 10s));  // it holds the first session's handle, no call yet
    s.expire_session();
    {
        auto other = s.make_mutex("other");  // this thread replaces the expired session
        ASSERT_TRUE(other->try_lock_for(10s));
        other->unlock();
    }
    EXPECT_EQ(s.stats().sessions, 2u);
    EXPECT_EQ(s.stats().handles_closed, 0u) << "the replacer closed a handle another thread was about to call on";
    gate.open();
    picker.join();
    EXPECT_TRUE(got) << "the picker did not queue again in the new session";
    EXPECT_EQ(s.stats().handles_closed, 1u) << "the old handle was not closed by its last user";
}

// A waiter whose only blocker is its predecessor takes the lock on that node's deletion event,
// without listing the queue again (sequence numbers only grow: nothing can appear ahead of it).
// Curator lists again: one more round trip per hand-over.
TEST(ZooKeeperLock, TheOnlyBlockersDeletionHandsOverWithoutAListing) {
    const auto zk = parse_zookeeper_url(backend_url("zookeeper"));
    LockServiceOptions o;
    o.prefix = "solo:";
    ZooKeeperLockService holder(zk, o);
    ZooKeeperLockService waiter(zk, o);
    auto h = holder.make_mutex("m");
    h->lock();
    std::atomic<int> watching{0};
    auto armed = fault::arm("locks.zookeeper.watching", [&] { watching.fetch_add(1); });
    std::atomic<bool> acquired{false};
    std::thread t([&] {
        auto w = waiter.make_mutex("m");
        w->lock();
        acquired = true;
        w->unlock();
    });
    ASSERT_TRUE(eventually([&] { return watching.load() == 1; }, 20s)) << "the waiter never set its watch";
    EXPECT_FALSE(acquired.load());
    h->unlock();
    t.join();
    EXPECT_TRUE(acquired.load());
    EXPECT_EQ(watching.load(), 1) << "the waiter waited again after the holder's release";
    EXPECT_EQ(waiter.stats().handovers_without_listing, 1u);
}

// The shortcut above is only for a waiter's *only* blocker: W2 queued behind the holder H and a
// waiter W1; W1 gives up (its deadline passes, its node is deleted) while H still holds. W2 must
// list the queue again and wait for H, not take W1's deletion for the lock's release.
TEST(ZooKeeperLock, AWaiterThatGivesUpAheadIsNotTakenForTheRelease) {
    const auto zk = parse_zookeeper_url(backend_url("zookeeper"));
    LockServiceOptions o;
    o.prefix = "ahead:";
    ZooKeeperLockService holder(zk, o);
    ZooKeeperLockService first(zk, o);
    ZooKeeperLockService second(zk, o);
    auto h = holder.make_mutex("m");
    h->lock();
    // W1's first arrival at the watch point waits at the gate (its watch already set) until W2
    // has queued behind it; every other arrival is only counted.
    std::atomic<int> watching{0};
    fault::Gate w1_gate;
    auto armed = fault::arm("locks.zookeeper.watching", [&, pass = w1_gate.action()] {
        if (watching.fetch_add(1) == 0) pass();
    });
    constexpr auto kW1Wait = 300ms;
    std::atomic<bool> w1_got{true};
    const auto w1_start = std::chrono::steady_clock::now();
    std::thread w1([&] {
        auto m = first.make_mutex("m");
        w1_got = m->try_lock_for(kW1Wait);
        if (w1_got) m->unlock();
    });
    ASSERT_TRUE(w1_gate.wait_arrivals(1, 20s)) << "W1 never queued";
    std::atomic<bool> w2_got{false};
    std::thread w2([&] {
        auto m = second.make_mutex("m");
        m->lock();
        w2_got = true;
        m->unlock();
    });
    ASSERT_TRUE(eventually([&] { return watching.load() == 2; }, 20s)) << "W2 never queued behind W1";
    // W1's deadline has passed when it leaves the gate: it gives up and deletes its node.
    std::this_thread::sleep_until(w1_start + kW1Wait + 50ms);
    w1_gate.open();
    w1.join();
    EXPECT_FALSE(w1_got.load());
    // W2 either (wrongly) took the lock or listed again and now watches H.
    ASSERT_TRUE(eventually([&] { return w2_got.load() || watching.load() == 3; }, 20s));
    EXPECT_FALSE(w2_got.load()) << "W2 took the deletion of a waiter ahead of it for the holder's release";
    EXPECT_EQ(second.stats().handovers_without_listing, 0u);
    h->unlock();
    w2.join();
    EXPECT_TRUE(w2_got.load());
    EXPECT_EQ(second.stats().handovers_without_listing, 1u) << "W2's second wait had one blocker, H";
}

// A waiter cut off by latency (everything the ensemble sends it late by 2T, T its session
// timeout: no reply and no reconnection handshake arrives within the client's 2T/3) while the
// holder releases, so that its queue node becomes the first. try_lock_until must return by its
// deadline (false, or a typed error), and its node must not keep the lock from a rival that
// reaches the ensemble directly while the latency lasts: its reconnection attempts renew the
// session at the ensemble, so the service closes the session after a whole T disconnected and
// the ensemble expires it T later (then: by latency + 2T/3 + 4T/3 + T + one tick).
TEST(ZooKeeperLock, AWaiterCutOffByLatencyGivesUpByItsDeadlineAndDoesNotKeepTheLock) {
    using Clock = std::chrono::steady_clock;
    const std::string url = backend_url("zookeeper");
    constexpr auto kT = 1500ms;  // backend_url's session timeout
    LockServiceOptions o;
    o.prefix = "cutoff:";
    ZooKeeperLockService holder(parse_zookeeper_url(url), o);
    ZooKeeperLockService rival_service(parse_zookeeper_url(url), o);
    ProxiedLockService waiter = open_proxied_lock_service(url, o);
    auto* waiter_zk = dynamic_cast<ZooKeeperLockService*>(waiter.service.get());
    ASSERT_NE(waiter_zk, nullptr);
    auto held = holder.make_mutex("line");
    held->lock();
    std::atomic<int> watching{0};
    auto armed = fault::arm("locks.zookeeper.watching", [&] { watching.fetch_add(1); });
    auto w = waiter.service->make_mutex("line");
    Clock::time_point deadline{};
    std::promise<Clock::time_point> deadline_set;
    std::string outcome;
    Clock::time_point returned{};
    std::thread t([&] {
        deadline = Clock::now() + 3s;
        deadline_set.set_value(deadline);
        try {
            outcome = w->try_lock_until(deadline) ? "acquired" : "not granted";
        } catch (const Error&) {
            outcome = "typed error";
        } catch (const std::exception& e) {
            outcome = std::string("untyped error: ") + e.what();
        }
        returned = Clock::now();
    });
    deadline_set.get_future().wait();
    ASSERT_TRUE(eventually([&] { return watching.load() == 1; }, 20s)) << "the waiter never queued";
    waiter.latency(2 * kT, FaultDirection::ServerToClient);
    const auto cut_at = Clock::now();
    held->unlock();  // the waiter's node is first now; the watch event reaches it 2T late
    auto rival = rival_service.make_mutex("line");
    const bool rival_got = rival->try_lock_for(8s);
    const auto rival_at = Clock::now();
    t.join();
    std::cout << "[ measure ] zookeeper, waiter cut off by 2T of latency: " << outcome << " "
              << std::chrono::duration_cast<std::chrono::milliseconds>(returned - deadline).count()
              << " ms after its deadline; the rival acquired after "
              << std::chrono::duration_cast<std::chrono::milliseconds>(rival_at - cut_at).count() << " ms; "
              << waiter_zk->stats().sessions_given_up << " session(s) closed, " << waiter_zk->stats().nodes_given_up
              << " node(s) given up\n";
    EXPECT_TRUE(outcome == "not granted" || outcome == "typed error") << outcome;
    EXPECT_LE(returned - deadline, 500ms) << "try_lock_until overran its deadline";
    EXPECT_TRUE(rival_got) << "the cut-off waiter's node kept the lock from the rival";
    EXPECT_LE(rival_at - cut_at, 3 * kT + 2 * kT / 3 + 1s);
    EXPECT_GE(waiter_zk->stats().sessions_given_up, 1u);
    if (rival_got) rival->unlock();
    // Healed, the waiter's service opens a new session and locks again.
    waiter.pass();
    const bool relocked = w->try_lock_for(10s);
    EXPECT_TRUE(relocked) << "the waiter's service did not lock again once the network healed";
    if (relocked) w->unlock();
}

// The floor the ZooKeeper lock cycle is compared with: a raw create-ephemeral-sequential + delete.
TEST(ZooKeeperLock, RawFloorIsMeasured) {
    const auto o = parse_zookeeper_url(backend_url("zookeeper"));
    ZooKeeperLockService s(o);  // makes sure the root exists
    zhandle_t* zh = zookeeper_init(o.hosts.c_str(), nullptr, 10000, nullptr, nullptr, 0);
    ASSERT_NE(zh, nullptr);
    ASSERT_TRUE(eventually([&] { return zoo_state(zh) == ZOO_CONNECTED_STATE; }, 10s)) << "no session";
    std::vector<double> cycles;
    for (int i = 0; i < 200; ++i) {
        char buf[256];
        const auto t0 = std::chrono::steady_clock::now();
        ASSERT_EQ(zoo_create(zh, "/lockstep/raw-", "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, buf, sizeof buf), ZOK);
        ASSERT_EQ(zoo_delete(zh, buf, -1), ZOK);
        cycles.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    zookeeper_close(zh);
    std::sort(cycles.begin(), cycles.end());
    std::cout << "[ measure ] zookeeper raw create+delete p50 " << cycles[100] << " ms\n";
}

TEST(LocalZooKeeper, ServerDiesWithItsOwnerEvenOnSigkill) {
    Child owner("zk-owner", {});
    auto line = owner.expect("ZK ", 60s);
    ASSERT_TRUE(line) << "the owner did not start its server";
    const pid_t server = std::stoi(line->substr(3));
    ASSERT_EQ(::kill(server, 0), 0);
    owner.signal(SIGKILL);
    owner.wait();
    EXPECT_TRUE(eventually([&] { return ::kill(server, 0) != 0; }, 10s, 20ms)) << "the private ZooKeeper outlived its owner";
}

}  // namespace
}  // namespace lockstep::test
#endif
