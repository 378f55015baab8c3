// Redlock against five real, independent redis-servers (LocalRedisGroup): the quorum, the
// fencing-token argument of docs/locks.md "Redlock" under restarts of masters without
// persistence, racing acquirers, and the loss of a majority. The cases every backend shares
// (stopped holder and its refused fenced write, killed holder, two processes × 8 threads) run in
// tests/lock_conformance with the redlock backend. Failures are forced (SIGKILL, restart,
// SIGSTOP of a master, a barrier), and waits are for the real state, never a hopeful sleep.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <thread>

#include "eventually.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/locks/redlock_lock_service.h"
#include "lockstep/servers/local_redis_group.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

LocalRedisGroup& group() {
    static LocalRedisGroup g{LocalRedisGroupOptions{}};
    return g;
}

class Redlock : public ::testing::Test {
protected:
    void SetUp() override {
        static std::atomic<int> n{0};
        prefix_ = "rl" + std::to_string(::getpid()) + "_" + std::to_string(n.fetch_add(1)) + ":";
    }
    void TearDown() override {
        // Every master running and awake again for the next test.
        for (std::size_t i = 0; i < group().size(); ++i) {
            group().resume(i);
            if (group().pid(i) == 0) group().start(i);
        }
    }
    std::unique_ptr<RedlockLockService> open(std::string query = "", LockServiceOptions o = {}) {
        o.prefix = prefix_;
        return std::make_unique<RedlockLockService>(parse_redlock_url(group().redlock_url() + query), std::move(o));
    }
    // The master's own view: the lock key's owner (nullopt: absent) and the fencing counter.
    std::optional<std::string> key_on(std::size_t node, RedlockLockService& s, const std::string& name) {
        return RedisClient(group().redis_options(node)).get(s.lock_key(name));
    }
    long long counter_on(std::size_t node, RedlockLockService& s, const std::string& name) {
        return std::stoll(RedisClient(group().redis_options(node)).get(s.fence_key(name)).value_or("0"));
    }
    static LockOptions lease(std::chrono::milliseconds l) {
        LockOptions o;
        o.lease = l;
        return o;
    }
    std::string prefix_;
};

TEST_F(Redlock, UrlsAndOptionsAreCheckedWithTheirPartNamed) {
    EXPECT_THROW(parse_redlock_url("redis://127.0.0.1:1"), ConfigError);
    EXPECT_THROW(parse_redlock_url("redlock://"), ConfigError);
    try {
        parse_redlock_url("redlock://127.0.0.1:1?restarts=x");
        ADD_FAILURE() << "no ConfigError";
    } catch (const ConfigError& e) {
        EXPECT_EQ(e.part(), "query parameter 'restarts'");
    }
    EXPECT_THROW(parse_redlock_url("redlock://127.0.0.1:1?fanout=sideways"), ConfigError);
    EXPECT_THROW(parse_redlock_url("redlock://127.0.0.1:1?pool_size=abc"), ConfigError);
    const auto o = parse_redlock_url("redlock://a:1,b:2,c:3?restarts=0&fanout=sequential&socket_timeout=100ms");
    EXPECT_EQ(o.masters.size(), 3u);
    EXPECT_EQ(o.tolerated_restarts, 0);
    EXPECT_FALSE(o.parallel);
    EXPECT_EQ(o.node.socket_timeout, 100ms);
    EXPECT_EQ(o.node.connect_timeout, 250ms);  // Redlock's default: a dead master must not stall a round
    EXPECT_THROW(RedlockLockService(parse_redlock_url("redlock://a:1,b:2,c:3?restarts=3")), ConfigError);  // quorum 4 of 3
    auto s = open();
    EXPECT_EQ(s->masters(), 5u);
    EXPECT_EQ(s->quorum(), 4u);
    EXPECT_EQ(open("?restarts=0")->quorum(), 3u);
    EXPECT_FALSE(s->supports_read_write());
    EXPECT_THROW(s->make_read_write_lock("rw"), ConfigError);
    EXPECT_THROW(s->make_mutex(""), ConfigError);
    EXPECT_THROW(s->make_mutex("short", lease(5ms)), ConfigError);
    EXPECT_EQ(open_lock_service(group().redlock_url())->backend(), "redlock");
}

TEST_F(Redlock, AHoldIsTheKeyOnEveryMasterAndTheTokenIsEveryMastersCounter) {
    auto s = open();
    auto m = s->make_mutex("k");
    m->lock();
    for (std::size_t i = 0; i < group().size(); ++i) {
        EXPECT_TRUE(key_on(i, *s, "k")) << "master " << i;
        EXPECT_EQ(counter_on(i, *s, "k"), m->fence_token()) << "master " << i;
    }
    m->unlock();
    for (std::size_t i = 0; i < group().size(); ++i) EXPECT_FALSE(key_on(i, *s, "k")) << "master " << i;
}

TEST_F(Redlock, MutualExclusionAndIncreasingTokensAcrossServices) {
    auto a = open(), b = open();
    auto ma = a->make_mutex("mx"), mb = b->make_mutex("mx");
    FenceToken last = 0;
    for (int i = 0; i < 5; ++i) {
        ASSERT_TRUE(ma->try_lock());
        EXPECT_GT(ma->fence_token(), last);
        last = ma->fence_token();
        EXPECT_FALSE(mb->try_lock());
        ma->unlock();
        ASSERT_TRUE(mb->try_lock());
        EXPECT_GT(mb->fence_token(), last);
        last = mb->fence_token();
        EXPECT_FALSE(ma->try_lock());
        mb->unlock();
    }
}

// Tolerated: one master restarts EMPTY while A holds. A keeps 4 of 5 = the quorum and stays
// held; B can reach 1 master only. After A's release B acquires, and the restarted master's
// counter (0 after the restart) is raised to B's token by the commit round.
TEST_F(Redlock, OneMasterRestartedEmptyWhileHeldKeepsTheHoldAndTheNextTokenIsHigher) {
    auto a = open(), b = open();
    auto ma = a->make_mutex("r1", lease(1200ms)), mb = b->make_mutex("r1", lease(1200ms));
    ma->lock();
    const FenceToken t_a = ma->fence_token();
    group().restart(0);
    const auto renewed = a->renewals();
    EXPECT_FALSE(key_on(0, *a, "r1"));
    EXPECT_FALSE(mb->try_lock());
    // Three renewals granted by a quorum after the restart: by the 4 others (the restarted master
    // has no key of A's to renew), every lease/3, the last about one lease after the acquisition,
    // when the keys it set would have expired without them.
    ASSERT_TRUE(eventually_value([&] { return a->renewals(); }, [&](std::uint64_t n) { return n >= renewed + 3; }))
        << "the watchdog did not renew on a quorum (" << renewed << " renewals before the restart)";
    EXPECT_FALSE(ma->lost());
    for (std::size_t i = 1; i < group().size(); ++i) EXPECT_TRUE(key_on(i, *a, "r1")) << "master " << i;
    EXPECT_FALSE(mb->try_lock());
    ma->unlock_checked();
    ASSERT_TRUE(mb->try_lock_for(5s));
    EXPECT_GT(mb->fence_token(), t_a);
    EXPECT_EQ(counter_on(0, *b, "r1"), mb->fence_token()) << "the empty master was raised to the token";
    mb->unlock();
}

// Beyond the tolerance but still a minority: two masters restart empty. A keeps 3 < 4, which it
// can never turn back into a quorum: its watchdog reports the hold lost (Expired). B cannot get
// a quorum until A's remaining keys expire; then its token exceeds A's, because any 4 masters
// include one of the 3 that kept A's counter.
TEST_F(Redlock, TwoMastersRestartedEmptyLoseTheHoldAndTheNextHolderStillGetsAHigherToken) {
    std::atomic<int> reason{-1};
    LockServiceOptions so;
    so.on_lost = [&](const LockLoss& l) { reason = static_cast<int>(l.reason); };
    auto a = open("", so), b = open();
    // A long lease: B's first attempt must come while A's 3 remaining keys surely live.
    auto ma = a->make_mutex("r2", lease(3000ms)), mb = b->make_mutex("r2", lease(3000ms));
    ma->lock();
    const FenceToken t_a = ma->fence_token();
    group().restart(0);
    group().restart(1);
    EXPECT_FALSE(mb->try_lock()) << "3 masters still carry A's key: no quorum of 4 for B";
    ASSERT_TRUE(eventually([&] { return ma->lost() && reason.load() != -1; }));
    EXPECT_EQ(reason.load(), static_cast<int>(LockLossReason::Expired));
    ASSERT_TRUE(mb->try_lock_for(10s));
    EXPECT_GT(mb->fence_token(), t_a);
    for (std::size_t i = 0; i < group().size(); ++i) EXPECT_GE(counter_on(i, *b, "r2"), t_a) << "master " << i;
    EXPECT_THROW(ma->unlock_checked(), LockLostError);
    mb->unlock();
}

// Two acquirers released by one barrier, 25 rounds: never two winners (split votes may leave
// none: Redlock's one-shot try_lock promises at most one). Then both wait in turn: each hold is
// alone inside, and the tokens rise in acquisition order.
TEST_F(Redlock, RacingAcquirersNeverBothWinAndTokensFollowTheOrderOfHolds) {
    auto a = open(), b = open();
    auto ma = a->make_mutex("race"), mb = b->make_mutex("race");
    FenceToken last = 0;
    for (int round = 0; round < 25; ++round) {
        std::barrier sync(2);
        std::atomic<int> wins{0};
        FenceToken won_token = 0;
        auto racer = [&](DistributedMutex& m) {
            sync.arrive_and_wait();
            if (m.try_lock()) {
                wins.fetch_add(1);
                won_token = m.fence_token();
            }
            sync.arrive_and_wait();  // both attempts are over before the winner releases
            if (m.held_by_this_thread()) m.unlock();
        };
        std::thread ta(racer, std::ref(*ma)), tb(racer, std::ref(*mb));
        ta.join();
        tb.join();
        ASSERT_LE(wins.load(), 1) << "round " << round;
        if (wins.load() == 1) {
            EXPECT_GT(won_token, last);
            last = won_token;
        }
    }
    std::atomic<int> inside{0};
    std::mutex order_mu;
    std::vector<FenceToken> order;
    auto waiter = [&](DistributedMutex& m) {
        for (int i = 0; i < 10; ++i) {
            m.lock();
            EXPECT_EQ(inside.fetch_add(1), 0);
            {
                std::lock_guard g(order_mu);
                order.push_back(m.fence_token());
            }
            inside.fetch_sub(1);
            m.unlock();
        }
    };
    std::thread ta(waiter, std::ref(*ma)), tb(waiter, std::ref(*mb));
    ta.join();
    tb.join();
    ASSERT_EQ(order.size(), 20u);
    for (std::size_t i = 1; i < order.size(); ++i) EXPECT_GT(order[i], order[i - 1]);
}

// A majority of masters dies while A holds: no renewal can reach a quorum, and when the
// validity runs out the hold is reported lost (Unreachable). An acquisition that cannot reach a
// quorum of masters at all is a ConnectionError, not an endless wait.
TEST_F(Redlock, LosingAMajorityOfMastersReportsTheHoldLost) {
    std::atomic<int> reason{-1};
    LockServiceOptions so;
    so.on_lost = [&](const LockLoss& l) { reason = static_cast<int>(l.reason); };
    auto a = open("", so);
    auto m = a->make_mutex("maj", lease(600ms));
    m->lock();
    for (std::size_t i = 0; i < 3; ++i) group().kill(i);
    ASSERT_TRUE(eventually([&] { return m->lost() && reason.load() != -1; }));
    EXPECT_EQ(reason.load(), static_cast<int>(LockLossReason::Unreachable));
    m->unlock();  // reports, never throws
    auto b = open();
    auto other = b->make_mutex("maj");
    EXPECT_THROW(other->try_lock(), ConnectionError);
}

// A master that hangs (SIGSTOP: connections accepted, nothing answered) costs one socket
// timeout, in parallel with the others' answers, and 4 of 5 still make a quorum.
TEST_F(Redlock, AStoppedMasterCostsOneTimeoutNotAFailure) {
    auto s = open("?socket_timeout=300ms");
    auto m = s->make_mutex("stopped");
    ASSERT_TRUE(m->try_lock());  // connections exist before the master stops
    m->unlock();
    group().pause(2);
    const auto t0 = Clock::now();
    ASSERT_TRUE(m->try_lock());
    EXPECT_LT(Clock::now() - t0, 3s);
    m->unlock();
    group().resume(2);
}

TEST_F(Redlock, SequentialFanOutGivesTheSameHolds) {
    auto s = open("?fanout=sequential");
    auto m = s->make_mutex("seq");
    m->lock();
    for (std::size_t i = 0; i < group().size(); ++i) EXPECT_EQ(counter_on(i, *s, "seq"), m->fence_token());
    m->unlock();
}

// L7 for Redlock: a waiter wakes on the release message, not on its poll. Its polls are set to a
// minute, so without the message it would still be asleep when try_lock_for's bound runs out.
// The waiter is stopped at "redlock.before_wait" (subscribed on every master, its retry refused)
// while the holder releases: the message arrives before the waiter waits, and only the message
// can wake it. Asserted on the service's wake-up counters, not on time.
TEST_F(Redlock, AWaiterWakesOnTheReleaseMessageNotOnItsPoll) {
    auto holder = open();
    auto o = parse_redlock_url(group().redlock_url());
    o.retry_min = o.retry_max = 60s;
    o.subscribed_poll = 60s;
    LockServiceOptions so;
    so.prefix = prefix_;
    RedlockLockService waiting(o, so);
    auto mh = holder->make_mutex("wake"), mw = waiting.make_mutex("wake");
    mh->lock();

    fault::Gate gate;
    fault::ArmOptions once;
    once.times = 1;
    auto armed = fault::arm("redlock.before_wait", gate.action(), once);
    std::atomic<bool> acquired{false};
    std::thread waiter([&] {
        acquired = mw->try_lock_for(30s);
        if (acquired) mw->unlock();
    });
    ASSERT_TRUE(gate.wait_arrivals(1, 10s));
    // Every master has the waiter's subscription (subscribe() returned after each confirmed it).
    for (std::size_t i = 0; i < group().size(); ++i) {
        const auto n = RedisClient(group().redis_options(i)).command({"PUBSUB", "SHARDNUMSUB", holder->lock_key("wake") + ":rl"});
        EXPECT_EQ(n.elements().at(1).integer(), 1) << "master " << i;
    }
    mh->unlock();
    gate.open();
    waiter.join();
    EXPECT_TRUE(acquired.load());
    EXPECT_EQ(waiting.wakeups_by_message(), 1u);
    EXPECT_EQ(waiting.wakeups_by_poll(), 0u);
    // The five masters announced the same release: one wake-up, and the subscriptions go.
    for (std::size_t i = 0; i < group().size(); ++i) {
        EXPECT_TRUE(eventually([&] {
            RedisClient c(group().redis_options(i));
            return c.command({"PUBSUB", "SHARDNUMSUB", holder->lock_key("wake") + ":rl"}).elements().at(1).integer() == 0;
        })) << "master " << i;
    }
}

}  // namespace
}  // namespace lockstep::test
