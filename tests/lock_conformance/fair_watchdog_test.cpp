// The fair Redis mutex's watchdog keeps the same promises as RedisMutex's (L5): a fixed lease
// (LockOptions::renew = false) is never extended and its end is reported as LeaseEnded; a hold
// whose renewals cannot reach Redis for a whole lease is reported Unreachable, not kept silently
// (a fair watchdog once renewed every hold and swallowed every renewal error).
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "lockstep/cache/redis_client.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/locks/lock_errors.h"
#include "lockstep/locks/lock_keys.h"
#include "lockstep/locks/redis_fair_lock_service.h"
#include "eventually.h"
#include "fair_test_support.h"
#include "test_servers.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// What the loss callback saw, and when.
struct Seen {
    std::mutex mu;
    int count = 0;
    LockLossReason reason{};
    std::string message;
    Clock::time_point at{};
    void record(const LockLoss& l) {
        std::lock_guard<std::mutex> g(mu);
        ++count;
        reason = l.reason;
        message = l.message;
        at = Clock::now();
    }
    int seen() {
        std::lock_guard<std::mutex> g(mu);
        return count;
    }
};

// One service and the mutex under test, with its losses recorded.
class RedisFairWatchdog : public ::testing::Test {
protected:
    std::unique_ptr<DistributedMutex> make(const std::string& name, std::chrono::milliseconds lease, bool renew) {
        options_.prefix = fair_test_prefix("fairdog");
        service_ = std::make_unique<RedisFairLockService>(servers().redis_options(), options_);
        key_ = LockKeys(options_.prefix, name).stem() + ":fair";
        LockOptions lo;
        lo.lease = lease;
        lo.renew = renew;
        lo.on_lost = [this](const LockLoss& l) { seen_.record(l); };
        return service_->make_mutex(name, lo);
    }

    LockServiceOptions options_;
    std::unique_ptr<RedisFairLockService> service_;
    std::string key_;  // the lock key on the server
    Seen seen_;
};

TEST_F(RedisFairWatchdog, AFixedLeaseIsNotRenewedAndItsEndIsReported) {
    RedisClient raw(servers().redis_options());
    auto m = make("fixed", 300ms, false);
    const auto locked = Clock::now();
    m->lock();
    ASSERT_TRUE(eventually([&] { return seen_.seen() == 1; }, 5s)) << "the end of a fixed lease was never reported";
    EXPECT_EQ(seen_.reason, LockLossReason::LeaseEnded) << seen_.message;
    // At its validity's end: the acquire's send time + lease − drift (hold_table.h: 1% of the lease, 3 ms here).
    EXPECT_GE(seen_.at - locked, 297ms) << "reported before the lease could have ended";
    // Not renewed: the server let the key expire with the lease (a renewing watchdog would have
    // pushed its TTL back to 300 ms every 100 ms, and the key would still be there).
    EXPECT_TRUE(eventually([&] { return raw.command({"EXISTS", key_}).integer() == 0; }, 1s));
    EXPECT_TRUE(m->lost());
    EXPECT_THROW(m->unlock_checked(), LockLostError);
    EXPECT_EQ(seen_.seen(), 1);
}

TEST_F(RedisFairWatchdog, RenewalsThatCannotReachRedisForAWholeLeaseReportTheHoldUnreachable) {
    auto m = make("cut-off", 300ms, true);
    std::atomic<int> failed{0};
    // Every renewal fails as a dead connection would, before it reaches Redis.
    auto armed = fault::arm("locks.watchdog.before_renew", [&] {
        failed.fetch_add(1);
        throw std::runtime_error("forced: Redis unreachable");
    });
    const auto locked = Clock::now();
    m->lock();
    ASSERT_TRUE(eventually([&] { return seen_.seen() == 1; }, 5s))
        << "a hold whose renewals all failed for a whole lease was never reported (" << failed.load()
        << " renewals failed)";
    EXPECT_EQ(seen_.reason, LockLossReason::Unreachable) << seen_.message;
    // Reported at the end of its validity (the hold table's expiry thread) or by the watchdog's
    // last failed renewal, whichever comes first; never later than the validity.
    EXPECT_TRUE(seen_.message.find("validity ended") != std::string::npos ||
                seen_.message.find("no renewal succeeded for a whole lease") != std::string::npos)
        << seen_.message;
    EXPECT_GE(failed.load(), 2) << "it gave up after one failed renewal instead of retrying within the lease";
    EXPECT_GE(seen_.at - locked, 297ms) << "reported before the lease could have ended";
    EXPECT_LE(seen_.at - locked, 400ms) << "reported late: the validity ended at 297 ms";
    EXPECT_TRUE(m->lost());
    EXPECT_THROW(m->unlock_checked(), LockLostError);
}

// Once renewals have failed up to the end of the last lease the server granted, the loss is
// reported then, not after one more renewal that hangs (a paused server: the socket timeout, 1 s
// by default). Forced: every renewal fails, and one sent at or after the lease's end hangs 2 s.
TEST_F(RedisFairWatchdog, AFailingHoldIsReportedAtItsLeasesEndNotAfterAHangingRenewal) {
    auto m = make("hung", 300ms, true);
    Clock::time_point locked{};
    std::atomic<bool> started{false};
    std::atomic<int> hung{0};
    auto armed = fault::arm("locks.watchdog.before_renew", [&] {
        if (started.load() && Clock::now() >= locked + 300ms) {
            hung.fetch_add(1);
            std::this_thread::sleep_for(2s);
        }
        throw std::runtime_error("forced: Redis unreachable");
    });
    locked = Clock::now();
    started = true;
    m->lock();
    ASSERT_TRUE(eventually([&] { return seen_.seen() == 1; }, 10s)) << "the failing hold was never reported";
    EXPECT_EQ(seen_.reason, LockLossReason::Unreachable) << seen_.message;
    EXPECT_LT(seen_.at - locked, 300ms + 1s) << "reported after a renewal that hung past the lease";
    EXPECT_EQ(hung.load(), 0) << "a renewal was sent after the lease had run out";
}

// Renewals that fail for less than a lease and then succeed keep the hold (a short outage is
// retried, not a loss).
TEST_F(RedisFairWatchdog, ARenewalThatFailsOnceIsRetriedAndTheHoldKept) {
    auto m = make("blip", 600ms, true);
    std::atomic<int> calls{0};
    auto armed = fault::arm("locks.watchdog.before_renew", [&] {
        if (calls.fetch_add(1) == 0) throw std::runtime_error("forced: one failed renewal");
    });
    m->lock();
    // Two renewals after the failed one: the hold was extended past its first lease.
    ASSERT_TRUE(eventually([&] { return calls.load() >= 3; }, 5s));
    EXPECT_EQ(seen_.seen(), 0) << seen_.message;
    EXPECT_FALSE(m->lost());
    EXPECT_NO_THROW(m->unlock_checked());
}

// A renewal under way while the holder unlocks finds the key gone: that is the release, not a
// loss (it once was reported lost, Expired, and on_lost ran for a hold its owner had
// just released). Forced: the watchdog is held at its first renewal while the test unlocks.
TEST_F(RedisFairWatchdog, ARenewalRacingTheUnlockIsNotReportedAsALoss) {
    auto m = make("racing", 300ms, true);
    fault::Gate at_renewal;
    auto held = fault::arm("locks.watchdog.before_renew", at_renewal.action(), fault::ArmOptions{0, 1, {}});
    std::atomic<int> handled{0};
    auto counting = fault::arm("locks.watchdog.after_renew", [&] { handled.fetch_add(1); });
    m->lock();
    ASSERT_TRUE(at_renewal.wait_arrivals(1, 5s)) << "the watchdog never renewed";
    m->unlock();        // the release deletes the key while the renewal waits
    at_renewal.open();  // the renewal now finds the key gone
    ASSERT_TRUE(eventually([&] { return handled.load() >= 1; }, 5s)) << "the held renewal never finished";
    EXPECT_EQ(seen_.seen(), 0) << "reported lost after its own unlock: " << seen_.message;
}

// Each hold is renewed a third into its own lease, not on one period for the whole service (a
// third of the shortest lease any hold ever had): one short-lease hold, long released, must not
// make a 3 s hold renew every 10 ms. The 3 s hold is renewed not before 1 s.
TEST(RedisFairWatchdogPlan, EachHoldIsRenewedOnItsOwnLeaseNotTheShortestOneTheServiceSaw) {
    LockServiceOptions o;
    o.prefix = fair_test_prefix("fairplan");
    RedisFairLockService service(servers().redis_options(), o);
    LockOptions brief;
    brief.lease = 30ms;
    auto short_lived = service.make_mutex("brief", brief);
    short_lived->lock();
    short_lived->unlock();
    LockOptions three_s;
    three_s.lease = 3s;
    auto m = service.make_mutex("long", three_s);
    std::atomic<int> renewals{0};
    auto counting = fault::arm("locks.watchdog.before_renew", [&] { renewals.fetch_add(1); });
    m->lock();
    std::this_thread::sleep_for(300ms);  // a third of the lease is 1 s: no renewal is due in this window
    EXPECT_EQ(renewals.load(), 0) << "the 3 s hold was renewed on the short lease's period";
    // And it is renewed when due, a third into its own lease.
    ASSERT_TRUE(eventually([&] { return renewals.load() >= 1; }, 10s)) << "the 3 s hold was never renewed";
    EXPECT_FALSE(m->lost());
    EXPECT_NO_THROW(m->unlock_checked());
}

}  // namespace
}  // namespace lockstep::test
