// A 3-node ZooKeeper ensemble (LocalZooKeeper with ensemble_size 3) loses its leader while a
// hold and a queued waiter exist. Curator's semantics, which the backend follows: a disconnect is
// SUSPENDED, not LOST; the hold is lost only when the session expires. A leader election that
// ends within the session timeout keeps every session (the new leader takes the sessions over
// and restarts their timers), so:
//   - the hold SURVIVES: not lost(), no on_lost call, it still excludes the waiter, and its
//     unlock_checked() does not throw;
//   - the waiter queued before the failover acquires once the holder releases (its watch was
//     re-set by the client after the reconnect, or it re-checked the queue on the session event);
//   - tokens stay monotonic: the waiter's czxid is greater than the holder's, and a node created
//     after the failover carries the new leader's epoch in its high 32 bits (docs/locks.md).
#include <gtest/gtest.h>

#ifdef LOCKSTEP_HAVE_ZOOKEEPER
#include <atomic>
#include <cstdlib>
#include <iostream>
#include <thread>

#ifndef THREADED
#define THREADED  // the C client's synchronous API
#endif
#include <zookeeper/zookeeper.h>

#include "eventually.h"
#include "lockstep/locks/zookeeper_lock_service.h"
#include "lockstep/servers/local_zookeeper.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

// The children of `path`, read by a client of its own (-1 on error).
int count_children(const std::string& hosts, const std::string& path) {
    zhandle_t* zh = zookeeper_init(hosts.c_str(), nullptr, 10000, nullptr, nullptr, 0);
    if (!zh) return -1;
    int n = -1;
    if (eventually([&] { return zoo_state(zh) == ZOO_CONNECTED_STATE; }, 10s)) {
        String_vector v{};
        if (zoo_get_children(zh, path.c_str(), 0, &v) == ZOK) {
            n = v.count;
            deallocate_String_vector(&v);
        }
    }
    zookeeper_close(zh);
    return n;
}

TEST(ZooKeeperEnsemble, AHoldSurvivesALeaderFailoverAndTokensStayMonotonic) {
    LocalZooKeeperOptions zo;
    zo.use_environment = false;  // an ensemble of our own: its leader is killed
    zo.ensemble_size = 3;
    LocalZooKeeper zk(zo);
    std::cout << "[ measure ] zookeeper: 3-node ensemble serving after " << zk.startup_time().count() << " ms\n";

    ZooKeeperLockOptions o;
    o.hosts = zk.hosts();
    // Long enough for an election on a loaded machine (the hold must survive it), and the
    // connect timeout covers a first connect during one.
    o.session_timeout = 15s;
    o.connect_timeout = 30s;
    std::atomic<int> losses{0};
    LockServiceOptions so;
    so.prefix = "failover:";
    so.on_lost = [&](const LockLoss&) { losses.fetch_add(1); };
    ZooKeeperLockService holder(o, so), waiting(o, so);

    auto m = holder.make_mutex("order:1");
    ASSERT_TRUE(m->try_lock_for(30s));
    const FenceToken t1 = m->fence_token();

    std::atomic<bool> got{false};
    std::atomic<FenceToken> t2{0};
    std::thread waiter([&] {
        auto w = waiting.make_mutex("order:1");
        if (!w->try_lock_for(120s)) return;
        t2 = w->fence_token();
        got = true;
        w->unlock();
    });
    const std::string dir = "/lockstep/failover:order:1#m";
    ASSERT_TRUE(eventually([&] { return count_children(zk.hosts(), dir) == 2; }, 30s, 20ms)) << "the waiter did not queue";

    const int old_leader = zk.leader();
    ASSERT_GE(old_leader, 0) << "no member says it leads";
    const auto t0 = std::chrono::steady_clock::now();
    zk.kill_node(old_leader);
    int new_leader = -1;
    ASSERT_TRUE(eventually(
        [&] {
            new_leader = zk.leader();
            return new_leader >= 0 && new_leader != old_leader;
        },
        60s, 20ms))
        << "no new leader";
    std::cout << "[ measure ] zookeeper: new leader (member " << new_leader << ") after "
              << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count()
              << " ms\n";

    // The hold survived the failover: still ours, and it still keeps the waiter out.
    ASSERT_TRUE(eventually([&] { return count_children(zk.hosts(), dir) == 2; }, 30s, 20ms))
        << "the holder's or the waiter's node went with the failover";
    EXPECT_FALSE(m->lost());
    EXPECT_EQ(losses.load(), 0);
    EXPECT_FALSE(got.load()) << "the waiter acquired while the hold survived";
    EXPECT_NO_THROW(m->unlock_checked());

    // The waiter acquires after the failover, with a greater token.
    ASSERT_TRUE(eventually([&] { return got.load(); }, 60s)) << "the waiter was not woken after the failover";
    waiter.join();
    EXPECT_GT(t2.load(), t1);

    // A node created under the new leader: a greater token, and a greater epoch (high 32 bits).
    ASSERT_TRUE(m->try_lock_for(30s));
    const FenceToken t3 = m->fence_token();
    m->unlock();
    EXPECT_GT(t3, t2.load());
    EXPECT_GT(t3 >> 32, t1 >> 32) << "the czxid's epoch did not grow with the leader change";
    EXPECT_EQ(losses.load(), 0);
}

}  // namespace
}  // namespace lockstep::test
#endif
