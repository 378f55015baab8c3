// lockstep's ZooKeeper locks and Apache Curator's recipes on one lock path, against the private
// ZooKeeper: the two follow the same node layout (EPHEMERAL_SEQUENTIAL children "_c_<id>-lock-<seq>"
// of the lock path, lowest sequence holds, each waiter watches its predecessor), so a C++ service
// and a Java service exclude each other. Every step is driven explicitly (the Java peer says when
// its node is queued), so each order below is forced, not hoped for.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "curator_peer.h"
#include "lockstep/core/error.h"
#include "lockstep/locks/lock_service.h"
#include "lockstep/locks/zookeeper_lock_service.h"
#include "lockstep/servers/local_zookeeper.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

LocalZooKeeper& zookeeper() {
    static LocalZooKeeper instance{LocalZooKeeperOptions{}};
    return instance;
}

long long token_of(const std::string& acquired_line) { return std::stoll(acquired_line.substr(sizeof("acquired"))); }

class CuratorInterop : public ::testing::Test {
protected:
    void SetUp() override {
        if (auto why = CuratorPeer::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
        name_ = std::string("interop-") + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    }
    std::unique_ptr<ZooKeeperLockService> lockstep_service() {
        ZooKeeperLockOptions zk;
        zk.hosts = zookeeper().hosts();
        zk.session_timeout = kSession;
        LockServiceOptions o;
        o.prefix = "";  // the lock path is then <root>/<name>#m, as a Curator user would name it
        return std::make_unique<ZooKeeperLockService>(zk, o);
    }
    std::unique_ptr<CuratorPeer> curator(const std::string& kind = "mutex") {
        return std::make_unique<CuratorPeer>(zookeeper().hosts(), kSession, mutex_path(), kind);
    }
    std::unique_ptr<CuratorPeer> curator_rw(const std::string& kind) {
        return std::make_unique<CuratorPeer>(zookeeper().hosts(), kSession, read_write_path(), kind);
    }
    std::string mutex_path() const { return "/lockstep/" + name_ + "#m"; }
    std::string read_write_path() const { return "/lockstep/" + name_ + "#rw"; }

    static constexpr std::chrono::milliseconds kSession{2000};
    std::string name_;
};

TEST_F(CuratorInterop, EachExcludesTheOtherInBothDirections) {
    auto locks = lockstep_service();
    auto mutex = locks->make_mutex(name_);
    auto peer = curator();

    const std::string held = peer->ask("try");
    ASSERT_EQ(held.rfind("acquired ", 0), 0u) << held;
    EXPECT_FALSE(mutex->try_lock()) << "lockstep acquired a lock Curator holds";
    EXPECT_EQ(peer->ask("release"), "released");

    ASSERT_TRUE(mutex->try_lock_for(5s));
    EXPECT_EQ(peer->ask("try"), "busy") << "Curator acquired a lock lockstep holds";
    mutex->unlock();
    EXPECT_EQ(peer->ask("try").rfind("acquired ", 0), 0u);
    EXPECT_EQ(peer->ask("release"), "released");
}

TEST_F(CuratorInterop, WaitersAreServedInArrivalOrderAcrossTheTwoLanguages) {
    auto locks = lockstep_service();
    auto first = locks->make_mutex(name_);
    ASSERT_TRUE(first->try_lock_for(5s));

    // Curator queues second (its node exists before lockstep's third waiter starts)...
    auto peer = curator();
    ASSERT_EQ(peer->ask("acquire"), "queued");
    // ...lockstep's waiter third, on another thread (holds are per thread).
    std::atomic<bool> third_acquired{false};
    std::promise<void> release_third;
    auto third = std::async(std::launch::async, [&] {
        auto m = locks->make_mutex(name_);
        m->lock();
        third_acquired = true;
        release_third.get_future().wait();
        m->unlock();
    });
    for (int i = 0; i < 2000 && peer->ask("participants") != "participants 3"; ++i) std::this_thread::sleep_for(5ms);
    ASSERT_EQ(peer->ask("participants"), "participants 3") << "lockstep's second waiter never queued";

    first->unlock();
    const auto granted = peer->next_line();
    ASSERT_TRUE(granted.has_value());
    EXPECT_EQ(granted->rfind("acquired ", 0), 0u) << *granted;
    EXPECT_FALSE(third_acquired.load()) << "the later lockstep waiter overtook the earlier Curator waiter";

    EXPECT_EQ(peer->ask("release"), "released");
    for (int i = 0; i < 1000 && !third_acquired; ++i) std::this_thread::sleep_for(5ms);
    EXPECT_TRUE(third_acquired.load());
    release_third.set_value();
    third.get();
}

TEST_F(CuratorInterop, ACuratorHolderWhoseSessionExpiresFreesLockstepsWaiter) {
    auto locks = lockstep_service();
    auto mutex = locks->make_mutex(name_);
    auto peer = curator();
    ASSERT_EQ(peer->ask("try").rfind("acquired ", 0), 0u);
    EXPECT_FALSE(mutex->try_lock());

    const auto killed = std::chrono::steady_clock::now();
    peer->kill();  // no close: the node stays until the ensemble expires the session
    ASSERT_TRUE(mutex->try_lock_for(kSession * 5)) << "the dead Curator holder's node never went away";
    const auto waited = std::chrono::steady_clock::now() - killed;
    EXPECT_LT(waited, kSession * 5);
    mutex->unlock();
}

TEST_F(CuratorInterop, ALockstepHolderThatGoesAwayFreesCuratorsWaiter) {
    auto peer = curator();
    {
        auto locks = lockstep_service();
        auto mutex = locks->make_mutex(name_);
        ASSERT_TRUE(mutex->try_lock_for(5s));
        ASSERT_EQ(peer->ask("acquire"), "queued");
        // The holder's service ends (its session closes, its ephemeral node with it) without an
        // unlock: the hold is reported lost and Curator's waiter is next.
        mutex.reset();
    }
    const auto granted = peer->next_line(std::chrono::milliseconds(kSession * 5));
    ASSERT_TRUE(granted.has_value()) << "Curator's waiter was never granted";
    EXPECT_EQ(granted->rfind("acquired ", 0), 0u) << *granted;
    EXPECT_EQ(peer->ask("release"), "released");
}

TEST_F(CuratorInterop, FencingTokensIncreaseAcrossBothLanguages) {
    auto locks = lockstep_service();
    auto mutex = locks->make_mutex(name_);
    auto peer = curator();

    const auto curator_first = token_of(peer->ask("try"));
    EXPECT_EQ(peer->ask("release"), "released");
    ASSERT_TRUE(mutex->try_lock_for(5s));
    const auto lockstep_second = mutex->fence_token();
    mutex->unlock();
    const auto curator_third = token_of(peer->ask("try"));
    EXPECT_EQ(peer->ask("release"), "released");

    // Both sides' token is the czxid of the holder's node.
    EXPECT_LT(curator_first, lockstep_second);
    EXPECT_LT(lockstep_second, curator_third);
}

TEST_F(CuratorInterop, ReadersOfBothLanguagesShareTheReadWriteLockAndExcludeWriters) {
    auto locks = lockstep_service();
    auto rw = locks->make_read_write_lock(name_);
    auto curator_reader = curator_rw("read");
    auto curator_writer = curator_rw("write");

    ASSERT_TRUE(rw->try_lock_shared_for(5s));
    EXPECT_EQ(curator_reader->ask("try").rfind("acquired ", 0), 0u) << "a Curator reader was refused beside a lockstep reader";
    EXPECT_EQ(curator_writer->ask("try"), "busy") << "a Curator writer acquired beside two readers";
    rw->unlock_shared();
    EXPECT_EQ(curator_writer->ask("try"), "busy") << "a Curator writer acquired beside the Curator reader";
    // lockstep's writer (on another thread: the read hold was this thread's) waits for Curator's reader.
    std::promise<bool> tried;
    auto writer = std::async(std::launch::async, [&] {
        auto w = locks->make_read_write_lock(name_);
        tried.set_value(!w->try_lock());
        const bool later = w->try_lock_for(10s);
        if (later) w->unlock();
        return later;
    });
    const bool refused = tried.get_future().get();  // tried while Curator's reader still holds
    EXPECT_EQ(curator_reader->ask("release"), "released");
    const bool later = writer.get();
    EXPECT_TRUE(refused) << "lockstep's writer acquired beside a Curator reader";
    EXPECT_TRUE(later) << "lockstep's writer was not granted after the Curator reader left";
}

TEST_F(CuratorInterop, ACuratorWriterExcludesLockstepReaders) {
    auto locks = lockstep_service();
    auto rw = locks->make_read_write_lock(name_);
    auto curator_writer = curator_rw("write");
    ASSERT_EQ(curator_writer->ask("try").rfind("acquired ", 0), 0u);
    EXPECT_FALSE(rw->try_lock_shared()) << "a lockstep reader acquired beside a Curator writer";
    EXPECT_FALSE(rw->try_lock()) << "a lockstep writer acquired beside a Curator writer";
    EXPECT_EQ(curator_writer->ask("release"), "released");
    EXPECT_TRUE(rw->try_lock_shared_for(5s));
    rw->unlock_shared();
}

TEST_F(CuratorInterop, ALockstepMutexJoinsAnExistingCuratorLockPath) {
    // A Java service already locks /locks/<name> with InterProcessMutex.
    auto peer = std::make_unique<CuratorPeer>(zookeeper().hosts(), kSession, "/locks/" + name_, "mutex");
    ASSERT_EQ(peer->ask("try").rfind("acquired ", 0), 0u);

    auto locks = open_lock_service("zookeeper://" + zookeeper().hosts() + "?root=/locks&kind_suffix=0",
                                   LockServiceOptions{.prefix = ""});
    auto mutex = locks->make_mutex(name_);
    EXPECT_FALSE(mutex->try_lock()) << "lockstep acquired /locks/" << name_ << " while Curator holds it";
    EXPECT_EQ(peer->ask("release"), "released");
    ASSERT_TRUE(mutex->try_lock_for(5s));
    EXPECT_EQ(peer->ask("try"), "busy");
    mutex->unlock();
}

TEST(ZooKeeperUrl, RootAndKindSuffixAreCheckedWhenParsed) {
    EXPECT_EQ(parse_zookeeper_url("zookeeper://127.0.0.1:2181?root=/locks&kind_suffix=0").root, "/locks");
    EXPECT_FALSE(parse_zookeeper_url("zookeeper://127.0.0.1:2181?kind_suffix=0").kind_suffix);
    EXPECT_THROW(parse_zookeeper_url("zookeeper://127.0.0.1:2181?root=locks"), ConfigError);
    EXPECT_THROW(parse_zookeeper_url("zookeeper://127.0.0.1:2181?root=/locks/"), ConfigError);
    EXPECT_THROW(parse_zookeeper_url("zookeeper://127.0.0.1:2181?kind_suffix=yes"), ConfigError);
}

}  // namespace
}  // namespace lockstep::test
