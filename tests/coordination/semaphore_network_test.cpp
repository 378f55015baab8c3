// A semaphore permit whose holder is cut off from its server (RACES L11 for permits): the holder
// reaches Redis or the ZooKeeper ensemble through a fault proxy that drops every packet while the
// connections stay open; a second client, reaching the server directly, waits for the last
// permit. The holder must know its permit lost -- lost() true -- no later than its bound, and
// before the second client gets the permit:
//   Redis      valid until sent + lease - drift (sent: the last renewal the server acknowledged,
//              at most the cut), so lost() by cut + lease; the server frees the permit at the
//              last renewal's arrival + lease.
//   ZooKeeper  valid until last heard + T - drift (last heard: the send time of the newest
//              request the ensemble answered, at most the cut), so lost() by cut + T; the
//              ensemble expires the session T after it last heard from the client. It does not
//              wait for the client library's own disconnection notice, which a starved I/O
//              thread delivers late.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "backends.h"
#include "eventually.h"
#include "lockstep/coordination/semaphore.h"
#include "lockstep/core/error.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/servers/proxied_lock_service.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The Redis permits' lease; ZooKeeper's is the session timeout of backend_url("zookeeper").
constexpr auto kRedisLease = 1500ms;
constexpr auto kZooKeeperSession = 1500ms;

std::string fresh_prefix() {
    static std::atomic<int> n{0};
    return "sn" + std::to_string(::getpid()) + "_" + std::to_string(n.fetch_add(1)) + ":";
}

double ms_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

class SemaphorePartitionTest : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        if (backend_url(GetParam()).empty()) GTEST_SKIP() << GetParam() << " cannot run here";
    }
    std::chrono::milliseconds bound() const { return GetParam() == "zookeeper" ? kZooKeeperSession : kRedisLease; }
};

TEST_P(SemaphorePartitionTest, APartitionedHolderKnowsItsPermitLostByItsBoundAndBeforeARivalGetsIt) {
    const std::string prefix = fresh_prefix();
    LockServiceOptions so;
    so.prefix = prefix;
    ProxiedLockService holder = open_proxied_lock_service(backend_url(GetParam()), so);
    auto rival_service = open_backend(GetParam(), prefix);

    std::atomic<int> losses{0};
    std::atomic<int> reason{-1};
    SemaphoreOptions ho{.permits = 2, .lease = kRedisLease, .on_lost = [&](const LockLoss& l) {
                            reason = static_cast<int>(l.reason);
                            losses.fetch_add(1);
                        }};
    auto holder_sem = make_semaphore(*holder.service, "pool", ho);
    auto rival_sem = make_semaphore(*rival_service, "pool", {.permits = 2, .lease = kRedisLease});

    // The rival holds one permit; the holder takes the last one.
    auto rival_first = rival_sem->try_acquire_for(10s);
    ASSERT_TRUE(rival_first);
    auto permit = holder_sem->try_acquire_for(10s);
    ASSERT_TRUE(permit);
    ASSERT_FALSE(permit->lost());
    // Renewed at least once, so the cut comes in the middle of a hold kept alive.
    if (GetParam() == "redis") {
        ASSERT_TRUE(eventually([&] { return holder_sem->renewals() >= 1; }, 5s));
    }

    holder.blackhole();
    const auto cut = Clock::now();
    // The holder polls its belief every millisecond; `believed_at`: the start of the last poll
    // that still said valid (the answer was computed after it).
    std::optional<Clock::time_point> believed_at, lost_at;
    std::atomic<bool> rival_done{false};
    std::thread poller([&] {
        const auto give_up = cut + bound() + 20s;
        while (Clock::now() < give_up) {
            const auto before = Clock::now();
            if (permit->lost()) {
                lost_at = before;
                break;
            }
            believed_at = before;
            if (rival_done.load()) break;
            std::this_thread::sleep_for(1ms);
        }
    });
    auto last = rival_sem->try_acquire_for(bound() + 20s);
    const auto rival_at = Clock::now();
    // Asked the moment the rival has the permit: the holder must already know.
    const bool lost_when_rival_got_it = permit->lost();
    rival_done = true;
    poller.join();
    holder.pass();

    ASSERT_TRUE(last) << "the rival never got the last permit";
    ASSERT_TRUE(lost_at) << "the cut-off holder never knew its permit lost";
    const double lost_ms = ms_between(cut, *lost_at);
    const double rival_ms = ms_between(cut, rival_at);
    std::cout << "[ measure ] " << GetParam() << ": the cut-off permit lost() " << lost_ms << " ms after the cut (bound "
              << bound().count() << " ms), the rival got the last permit after " << rival_ms << " ms\n";
    ASSERT_TRUE(believed_at);
    EXPECT_LT(*believed_at, cut + bound()) << "lost() still false " << ms_between(cut, *believed_at)
                                           << " ms after the cut, past the bound";
    EXPECT_TRUE(lost_when_rival_got_it) << "the rival got the permit while the holder still believed it held it";
    EXPECT_LT(*believed_at, rival_at) << "a poll that began after the rival got the permit still said valid";
    // The watchdog reports it too, once, as unreachable; the stop token is requested.
    EXPECT_TRUE(eventually([&] { return losses.load() == 1; }, 5s));
    EXPECT_TRUE(permit->stop_token().stop_requested());
    EXPECT_EQ(reason.load(), static_cast<int>(LockLossReason::Unreachable));
    EXPECT_THROW(permit->release_checked(), LockLostError);
    EXPECT_EQ(losses.load(), 1) << "one loss is reported once";
    last->release_checked();
    rival_first->release_checked();
}

INSTANTIATE_TEST_SUITE_P(Backends, SemaphorePartitionTest, ::testing::Values("redis", "zookeeper"),
                         [](const auto& info) { return backend_test_name(info.param); });

// A release that fails after the permit ran out (RACES L10, L11 for permits): the watchdog is held
// at its renewal, so no renewal extends the permits and nothing reports them before the releases
// do; the holder's network is cut, so each release call fails. The loss is what the holder learns,
// as from a lock: on_lost once with its reason and the stop token requested, LockLostError from
// release_checked() (not the network's error), nothing thrown from release().
TEST(SemaphoreReleaseTest, AReleaseThatFailsAfterThePermitRanOutReportsTheLossOnce) {
    if (backend_url("redis").empty()) GTEST_SKIP() << "redis cannot run here";
    LockServiceOptions so;
    so.prefix = fresh_prefix();
    ProxiedLockService holder = open_proxied_lock_service(backend_url("redis"), so);
    std::atomic<int> losses{0};
    std::atomic<int> reason{-1};
    std::mutex message_mutex;
    std::string message;
    auto sem = make_semaphore(*holder.service, "pool", {.permits = 2, .lease = 600ms, .on_lost = [&](const LockLoss& l) {
                                                            reason = static_cast<int>(l.reason);
                                                            std::lock_guard g(message_mutex);
                                                            message = l.message;
                                                            losses.fetch_add(1);
                                                        }});
    fault::Gate watchdog_held;
    auto armed = fault::arm("semaphore.before_renew", watchdog_held.action());
    struct OpenAtExit {
        fault::Gate& gate;
        ~OpenAtExit() { gate.open(); }  // before ~Semaphore joins its watchdog
    } open_at_exit{watchdog_held};

    auto checked = sem->acquire();
    auto reported = sem->acquire();
    ASSERT_TRUE(watchdog_held.wait_arrivals(1, 5s)) << "the watchdog never came to its first renewal";
    holder.blackhole();
    ASSERT_TRUE(eventually([&] { return checked.lost() && reported.lost(); }, 5s));
    const std::stop_token checked_stop = checked.stop_token();
    const std::stop_token reported_stop = reported.stop_token();
    ASSERT_EQ(losses.load(), 0) << "with the watchdog held nothing reported the loss before the releases";
    ASSERT_FALSE(checked_stop.stop_requested());

    EXPECT_THROW(checked.release_checked(), LockLostError);
    EXPECT_TRUE(checked_stop.stop_requested());
    EXPECT_EQ(losses.load(), 1);
    EXPECT_EQ(reason.load(), static_cast<int>(LockLossReason::Unreachable));
    {
        std::lock_guard g(message_mutex);
        EXPECT_NE(message.find("release failed"), std::string::npos) << message;
    }

    EXPECT_NO_THROW(reported.release());
    EXPECT_TRUE(reported_stop.stop_requested());
    EXPECT_EQ(losses.load(), 2);
    EXPECT_EQ(sem->held(), 0u);

    // The watchdog's next rounds find nothing left to report again.
    holder.pass();
    watchdog_held.open();
    ASSERT_TRUE(eventually([&] { return armed.hits() >= 3; }, 5s));
    EXPECT_EQ(losses.load(), 2) << "each loss is reported once";
}

}  // namespace
}  // namespace lockstep::test
