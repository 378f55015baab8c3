// Fencing tokens, the fenced MySQL write, and locks across a redis-server restart.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "eventually.h"
#include "locks_test_support.h"
#include "lockstep/core/error.h"
#include "lockstep/db/fenced_write.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/servers/demo_schema.h"
#include "lockstep/locks/redis_mutex.h"
#include "lockstep/locks/redis_read_write_lock.h"
#include "test_servers.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;
using test::LockProcess;
using Clock = std::chrono::steady_clock;

using test::eventually;

class FencingTest : public ::testing::Test {
protected:
    void SetUp() override {
        prefix_ = test::unique_lock_prefix();
        a_ = std::make_unique<LockProcess>(prefix_);
    }
    FenceToken acquire_token(RedisMutex& m) {
        m.lock();
        FenceToken t = m.fence_token();
        m.unlock();
        return t;
    }
    std::string prefix_;
    std::unique_ptr<LockProcess> a_;
};

TEST_F(FencingTest, EveryNewAcquisitionGetsAGreaterTokenReentryKeepsIt) {
    RedisMutex m(*a_->locks, "seq");
    FenceToken last = 0;
    for (int i = 0; i < 200; ++i) {
        m.lock();
        const FenceToken t = m.fence_token();
        EXPECT_GT(t, last);
        m.lock();
        EXPECT_EQ(m.fence_token(), t);
        m.unlock();
        m.unlock();
        last = t;
    }
}

TEST_F(FencingTest, TokensIncreaseAfterTheCounterIsDeletedOrExpires) {
    RedisMutex m(*a_->locks, "counterloss");
    FenceToken last = acquire_token(m);
    for (int i = 0; i < 50; ++i) {
        a_->redis->del({m.keys().fence()});
        const FenceToken t = acquire_token(m);
        EXPECT_GT(t, last) << "after deleting the counter, round " << i;
        last = t;
    }
    LockClientOptions o;
    o.fence_counter_ttl = 50ms;
    LockProcess shortlived(prefix_, o);
    RedisMutex s(*shortlived.locks, "counterloss");
    last = acquire_token(s);
    EXPECT_TRUE(eventually([&] { return !a_->redis->get(m.keys().fence()).has_value(); }));  // expired
    EXPECT_GT(acquire_token(s), last);
}

TEST_F(FencingTest, MutexAndWriteLockOfOneNameShareOneSequence) {
    RedisMutex m(*a_->locks, "shared");
    RedisReadWriteLock rw(*a_->locks, "shared");
    FenceToken last = 0;
    for (int i = 0; i < 20; ++i) {
        const FenceToken t1 = acquire_token(m);
        rw.lock();
        const FenceToken t2 = rw.fence_token();
        rw.unlock();
        EXPECT_GT(t1, last);
        EXPECT_GT(t2, t1);
        last = t2;
    }
}

TEST_F(FencingTest, ConcurrentAcquirersNeverShareAToken) {
    std::mutex m;
    std::vector<FenceToken> tokens;
    std::vector<std::thread> ts;
    LockProcess b(prefix_);
    for (int i = 0; i < 8; ++i) {
        ts.emplace_back([&, i] {
            RedisMutex rm(i % 2 ? *a_->locks : *b.locks, "concurrent");
            for (int k = 0; k < 25; ++k) {
                std::scoped_lock hold(rm);
                std::lock_guard l(m);
                tokens.push_back(rm.fence_token());
            }
        });
    }
    for (auto& t : ts) t.join();
    // Acquisitions were serialised by the lock, so tokens in acquisition order strictly increase.
    for (std::size_t i = 1; i < tokens.size(); ++i) EXPECT_GT(tokens[i], tokens[i - 1]);
    EXPECT_EQ(tokens.size(), 200u);
}

// ---------------------------------------------------------------------------------------------
// The fenced MySQL write.

class FencedWriteTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        pool_ = std::make_unique<MysqlPool>(test::servers().mysql_options());
        lockstep::testing::bootstrap_demo_schema(*pool_);
    }
    static void TearDownTestSuite() { pool_.reset(); }
    void SetUp() override {
        static std::mt19937_64 rng(std::random_device{}());
        id_ = static_cast<std::int64_t>(rng() % 1'000'000'000'000) + 1'000'000;
        pool_->execute(
            "INSERT INTO products (id, name, price, stock, version, fence) VALUES (?, 'start', 100, 10, 0, "
            "0)",
            {id_});
    }
    void TearDown() override { pool_->execute("DELETE FROM products WHERE id = ?", {id_}); }
    std::string name_of() {
        return pool_->query_one("SELECT name FROM products WHERE id = ?", {id_})->get<std::string>("name");
    }
    std::int64_t fence_of() {
        return pool_->query_one("SELECT fence FROM products WHERE id = ?", {id_})->get<std::int64_t>("fence");
    }

    static std::unique_ptr<MysqlPool> pool_;
    std::int64_t id_ = 0;
};
std::unique_ptr<MysqlPool> FencedWriteTest::pool_;

TEST_F(FencedWriteTest, NewerTokenWritesStaleTokenIsRefusedWithConflict) {
    EXPECT_TRUE(fenced_update(*pool_, id_, 200, {.assignments = "name = ?", .params = {"newer"}, .table = "products"}));
    EXPECT_EQ(fence_of(), 200);
    try {
        fenced_update(*pool_, id_, 100, {.assignments = "name = ?", .params = {"stale"}, .table = "products"});
        FAIL() << "a stale token wrote";
    } catch (const ConflictError& e) {
        EXPECT_EQ(e.recovery(), Recovery::RetryTransaction);
        EXPECT_NE(std::string(e.what()).find("100"), std::string::npos);
    }
    EXPECT_EQ(name_of(), "newer");
    EXPECT_EQ(fence_of(), 200);
}

TEST_F(FencedWriteTest, SameTokenRewriteFollowsTheRule) {
    EXPECT_TRUE(fenced_update(*pool_, id_, 300, {.assignments = "stock = stock - ?", .params = {1}, .table = "products"}));
    // Strict (default): a token writes once; a repeated write is refused (it already applied).
    EXPECT_THROW(fenced_update(*pool_, id_, 300, {.assignments = "stock = stock - ?", .params = {1}, .table = "products"}),
                 ConflictError);
    // NewerOrSame: the newest holder may write again; older tokens are still refused.
    FencedUpdate again{.assignments = "stock = stock - ?", .params = {1}, .table = "products", .rule = FenceRule::NewerOrSame};
    EXPECT_TRUE(fenced_update(*pool_, id_, 300, again));
    EXPECT_THROW(fenced_update(*pool_, id_, 299, again), ConflictError);
    EXPECT_EQ(pool_->query_one("SELECT stock FROM products WHERE id = ?", {id_})->get<int>("stock"), 8);
}

TEST_F(FencedWriteTest, MissingRowIsNotAConflict) {
    EXPECT_FALSE(fenced_update(*pool_, id_ + 1, 5, {.assignments = "name = ?", .params = {"x"}, .table = "products"}));
}

TEST_F(FencedWriteTest, InsideATransaction) {
    {
        Transaction tx(*pool_);
        EXPECT_TRUE(fenced_update(tx, id_, 10, {.assignments = "name = ?", .params = {"tx"}, .table = "products"}));
        tx.commit();
    }
    EXPECT_EQ(name_of(), "tx");
    EXPECT_THROW(fenced_update_sql({.assignments = "x = 1", .table = "products; DROP TABLE products"}),
                 ConfigError);
}

TEST_F(FencedWriteTest, L5_PausedHolderPastItsLeaseIsFencedOut) {
    // The holder takes the lock with a 1 s lease and no renewal, then is frozen (SIGSTOP) past
    // it. Another client takes the lock and writes. The frozen one wakes and writes late: the
    // database refuses it, and the row keeps the newer holder's value.
    const std::string prefix = test::unique_lock_prefix();
    const std::string name = "product:" + std::to_string(id_);
    test::Child child("hold", {{"PREFIX", prefix}, {"NAME", name}, {"LEASE_MS", "1000"}, {"RENEW", "0"}});
    auto held = child.expect("HELD ", 10s);
    ASSERT_TRUE(held);
    const FenceToken stale = std::stoll(held->substr(5));
    child.signal(SIGSTOP);

    LockProcess b(prefix);
    RedisMutex m(*b.locks, name);
    ASSERT_TRUE(m.try_lock_for(5s));  // after the frozen holder's lease ran out
    const FenceToken fresh = m.fence_token();
    EXPECT_GT(fresh, stale);
    EXPECT_TRUE(fenced_update(*pool_, id_, fresh, {.assignments = "name = ?", .params = {"newer-holder"}, .table = "products"}));

    child.signal(SIGCONT);
    child.send("WRITE " + std::to_string(id_) + " stale-holder");
    auto write = child.expect("WRITE", 10s);
    ASSERT_TRUE(write);
    EXPECT_EQ(write->rfind("WRITE REFUSED", 0), 0u) << *write;
    EXPECT_EQ(name_of(), "newer-holder");
    EXPECT_EQ(fence_of(), fresh);

    child.send("UNLOCK");
    EXPECT_EQ(child.expect("LOST", 5s).value_or(""), "LOST 1");
    EXPECT_EQ(child.read_line(5s).value_or("").rfind("UNLOCK_FAILED LockLostError", 0), 0u);
    EXPECT_TRUE(m.held_by_this_thread());
    EXPECT_FALSE(m.lost());
    m.unlock();
    EXPECT_EQ(child.wait(), 0);
}

// ---------------------------------------------------------------------------------------------
// redis-server restarts (no persistence): the failover-like case (L8).

TEST_F(FencingTest, L8_RestartWhileHeldHoldersSeeLossNothingCrashesNewAcquisitionsWork) {
    LOCKSTEP_REQUIRE_OWNED_REDIS();
    std::atomic<int> losses{0};
    LockClientOptions o;
    o.on_lost = [&](const LockLoss&) { losses.fetch_add(1); };
    LockProcess c(prefix_, o);
    RedisMutex m1(*c.locks, "restart1", {.lease = 1500ms});
    RedisMutex m2(*c.locks, "restart2", {.lease = 1500ms});
    RedisReadWriteLock rw(*c.locks, "restart3", {.lease = 1500ms});
    std::atomic<FenceToken> before{0};

    // Holders in their own threads (a hold belongs to its thread), each releasing when told.
    std::atomic<bool> release{false};
    std::atomic<int> holding{0}, saw_lost{0}, lost_at_unlock{0};
    std::vector<std::thread> threads;
    auto hold = [&](std::function<void()> lock_fn, std::function<void()> unlock_fn,
                    std::function<bool()> lost_fn) {
        threads.emplace_back([&, lock_fn, unlock_fn, lost_fn] {
            lock_fn();
            holding.fetch_add(1);
            while (!release.load()) std::this_thread::sleep_for(10ms);
            if (lost_fn()) saw_lost.fetch_add(1);
            try {
                unlock_fn();
            } catch (const LockLostError&) {
                lost_at_unlock.fetch_add(1);
            }
        });
    };
    hold(
        [&] {
            m1.lock();
            before = m1.fence_token();
        },
        [&] { m1.unlock_checked(); }, [&] { return m1.lost(); });
    hold([&] { m2.lock(); }, [&] { m2.unlock_checked(); }, [&] { return m2.lost(); });
    hold([&] { rw.lock_shared(); }, [&] { rw.unlock_shared_checked(); }, [&] { return rw.lost(); });
    // A lock with a 30 s lease held by another client, and a waiter on it: only the subscriber's
    // reconnect listener can wake that waiter in time.
    LockProcess other(prefix_);
    RedisMutex blocker(*other.locks, "restart4", {.lease = 30000ms});
    ASSERT_TRUE(blocker.try_lock());
    std::atomic<bool> waiter_got{false};
    threads.emplace_back([&] {
        RedisMutex blocked(*c.locks, "restart4", {.lease = 30000ms});
        try {
            if (blocked.try_lock_for(20s)) {
                waiter_got = true;
                blocked.unlock();
            }
        } catch (const std::exception& e) {
            ADD_FAILURE() << "waiter: " << e.what();
        }
    });
    struct JoinAll {
        std::atomic<bool>& release;
        std::vector<std::thread>& threads;
        ~JoinAll() {
            release = true;
            for (auto& t : threads) t.join();
        }
    } join_all{release, threads};
    ASSERT_TRUE(eventually([&] { return holding.load() == 3; }, 5s));
    std::this_thread::sleep_for(300ms);

    test::servers().restart_redis();
    const auto restarted = Clock::now();

    EXPECT_TRUE(eventually([&] { return losses.load() == 3; }, 3s)) << "holders must see the loss";
    EXPECT_TRUE(eventually([&] { return waiter_got.load(); }, 10s)) << "waiter not woken after the restart";
    std::cout << "[ measure  ] waiter acquired "
              << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - restarted).count()
              << " ms after the restart\n";
    release = true;
    for (auto& t : threads) t.join();
    threads.clear();
    EXPECT_EQ(saw_lost.load(), 3);
    EXPECT_EQ(lost_at_unlock.load(), 3);

    // New acquisitions work, and tokens still increase although the counter is gone.
    RedisMutex fresh(*c.locks, "restart1");
    ASSERT_TRUE(fresh.try_lock_for(2s));
    EXPECT_GT(fresh.fence_token(), before.load());
    fresh.unlock();
    EXPECT_THROW(blocker.unlock_checked(), LockLostError);
}

}  // namespace
}  // namespace lockstep
