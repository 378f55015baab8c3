// The validity rule and the hold table's loss flow without a server (locks/src/hold_validity.h,
// hold_table.h): a backend stand-in whose acquisition says when it was "sent", so a hold can be
// made that is nearly out of validity, or already past it, at a known instant. What every
// backend built on the table inherits: lost() turns true at valid_until with no call to the
// backend, on_lost fires once with a reason when the validity ends unrenewed (while a renewal
// "hangs": nothing extends it), an acknowledged renewal moves the validity on and a late one
// never moves it back, an unlock past the validity reports the loss and never releases (the lock
// may be someone else's by then), and a closed table refuses new locks.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <stop_token>
#include <thread>
#include <vector>

#include "../../locks/src/hold_table.h"
#include "eventually.h"
#include "lockstep/core/error.h"
#include "lockstep/core/mutex.h"
#include "lockstep/locks/lock_errors.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;
using locks_detail::Hold;
using locks_detail::HoldBackend;
using locks_detail::HoldKind;
using locks_detail::HoldTable;
using locks_detail::SteadyClock;
using locks_detail::SteadyTime;
using test::eventually;

// A backend whose acquisition was sent `sent_ago` before it returns, and which counts every call
// made to it (lost() must make none).
struct StandIn : HoldBackend {
    std::chrono::milliseconds sent_ago{0};
    std::atomic<int> acquires{0}, releases{0}, abandons{0};
    // When set, acquire() waits for it (an acquisition under way while the table closes).
    std::shared_future<void> hold_acquire;
    std::promise<void> acquiring;

    bool acquire(Hold& h, SteadyTime) override {
        acquires.fetch_add(1);
        if (hold_acquire.valid()) {
            acquiring.set_value();
            hold_acquire.wait();
        }
        h.token = acquires.load();
        h.key = "stand-in:" + h.name;
        h.valid_until.store(locks_detail::valid_until_from(SteadyClock::now() - sent_ago, h.lease));
        return true;
    }
    bool release(Hold&) override {
        releases.fetch_add(1);
        return true;
    }
    void abandon(Hold&) noexcept override { abandons.fetch_add(1); }
    std::string_view backend_name() const noexcept override { return "stand-in"; }
};

struct Reported {
    Mutex mu;
    std::vector<LockLoss> losses GUARDED_BY(mu);
    std::vector<SteadyTime> at GUARDED_BY(mu);
    std::function<void(const LockLoss&)> callback() {
        return [this](const LockLoss& l) {
            MutexLock g(mu);
            losses.push_back(l);
            at.push_back(SteadyClock::now());
        };
    }
    std::size_t count() {
        MutexLock g(mu);
        return losses.size();
    }
};

LockOptions lease_of(std::chrono::milliseconds lease) {
    LockOptions o;
    o.lease = lease;
    return o;
}

TEST(HoldValidityTest, TheDriftIsTwoMillisecondsOrOnePercentOfTheLease) {
    EXPECT_EQ(locks_detail::validity_drift(100ms), 2ms);
    EXPECT_EQ(locks_detail::validity_drift(200ms), 2ms);
    EXPECT_EQ(locks_detail::validity_drift(1500ms), 15ms);
    EXPECT_EQ(locks_detail::validity_drift(30s), 300ms);
}

TEST(HoldValidityTest, ValidityCountsFromTheSendTimeMinusTheDrift) {
    const SteadyTime sent = SteadyClock::now();
    EXPECT_EQ(locks_detail::valid_until_from(sent, 1500ms), sent + 1485ms);
    EXPECT_EQ(locks_detail::valid_until_from(sent, 100ms), sent + 98ms);
}

TEST(HoldValidityTest, ALateAcknowledgementNeverMovesTheValidityBackAndEvidenceNeverMovesItOn) {
    const SteadyTime t = SteadyClock::now();
    std::atomic<SteadyTime> v{t + 1s};
    locks_detail::extend_validity(v, t + 500ms);  // an older renewal acknowledged late
    EXPECT_EQ(v.load(), t + 1s);
    locks_detail::extend_validity(v, t + 2s);
    EXPECT_EQ(v.load(), t + 2s);
    locks_detail::shorten_validity(v, t + 3s);  // a disconnection bound later than the validity
    EXPECT_EQ(v.load(), t + 2s);
    locks_detail::shorten_validity(v, t + 300ms);
    EXPECT_EQ(v.load(), t + 300ms);
}

// RACES L11 at the table: nothing renews the hold (its renewal hangs), so it must count as lost
// from valid_until on, by the clock alone, and on_lost must fire then, not when some call fails.
TEST(HoldValidityTest, LostTurnsTrueAtValidUntilWithoutAskingTheBackendAndOnLostFiresOnceThen) {
    StandIn backend;
    Reported service, lock;
    HoldTable table("t1", service.callback(), backend);
    LockOptions o = lease_of(2000ms);
    o.on_lost = lock.callback();
    backend.sent_ago = 1800ms;  // valid for 2000 - 20 - 1800 = 180 ms more
    ASSERT_TRUE(table.lock(backend, "a", HoldKind::Mutex, SteadyTime::max(), o));
    const SteadyTime valid_until = table.find("a", HoldKind::Mutex)->valid_until.load();
    // Every answer is checked against the clock around it: false only if asked before
    // valid_until, true only if the answer came at or after it.
    bool lost = false;
    const SteadyTime give_up = SteadyClock::now() + 5s;
    while (!lost && SteadyClock::now() < give_up) {
        const SteadyTime before = SteadyClock::now();
        lost = table.lost("a", HoldKind::Mutex);
        const SteadyTime after = SteadyClock::now();
        if (lost) {
            EXPECT_GE(after, valid_until) << "lost() turned true before the validity ended";
        } else {
            EXPECT_LT(before, valid_until) << "lost() still false after the validity ended";
        }
        std::this_thread::sleep_for(1ms);
    }
    ASSERT_TRUE(lost) << "lost() never turned true";
    ASSERT_TRUE(eventually([&] { return lock.count() == 1; }, 5s, 1ms)) << "on_lost never fired";
    {
        MutexLock g(lock.mu);
        EXPECT_EQ(lock.losses[0].reason, LockLossReason::Unreachable);
        EXPECT_EQ(lock.losses[0].name, "a");
        EXPECT_GE(lock.at[0], valid_until);
        // The expiry thread wakes at valid_until; a loaded 2-core machine may run it a little late.
        EXPECT_LT(lock.at[0] - valid_until, 500ms) << "on_lost came long after the validity ended";
    }
    EXPECT_EQ(service.count(), 1u);
    EXPECT_EQ(table.losses(), 1u);
    EXPECT_EQ(backend.acquires.load(), 1);
    EXPECT_EQ(backend.releases.load() + backend.abandons.load(), 0) << "lost() and the expiry made a call";
    // Asking again, and unlocking, reports nothing twice; the loss is thrown by unlock_checked.
    EXPECT_TRUE(table.lost("a", HoldKind::Mutex));
    EXPECT_THROW(table.unlock(backend, "a", HoldKind::Mutex, UnlockMode::Throw), LockLostError);
    EXPECT_EQ(lock.count(), 1u);
    EXPECT_EQ(backend.releases.load(), 0) << "a hold past its validity was released: the lock may be another's";
}

TEST(HoldValidityTest, AnAcknowledgedRenewalKeepsTheHoldPastItsFirstValidity) {
    StandIn backend;
    Reported lock;
    HoldTable table("t2", nullptr, backend);
    LockOptions o = lease_of(2000ms);
    o.on_lost = lock.callback();
    backend.sent_ago = 1900ms;  // the acquisition alone is valid for 80 ms more
    ASSERT_TRUE(table.lock(backend, "b", HoldKind::Mutex, SteadyTime::max(), o));
    auto hold = table.find("b", HoldKind::Mutex);
    const SteadyTime first = hold->valid_until.load();
    const SteadyTime renewal_sent = SteadyClock::now();
    HoldTable::extend(*hold, renewal_sent);  // the renewal sent now was acknowledged
    EXPECT_EQ(hold->valid_until.load(), locks_detail::valid_until_from(renewal_sent, 2000ms));
    HoldTable::extend(*hold, renewal_sent - 1s);  // an older renewal's acknowledgement, late
    EXPECT_EQ(hold->valid_until.load(), locks_detail::valid_until_from(renewal_sent, 2000ms));
    // Past the first validity (well before the renewed one ends) the hold still stands.
    ASSERT_TRUE(eventually([&] { return SteadyClock::now() > first + 50ms; }, 5s, 1ms));
    EXPECT_FALSE(table.lost("b", HoldKind::Mutex));
    EXPECT_EQ(lock.count(), 0u);
    EXPECT_NO_THROW(table.unlock(backend, "b", HoldKind::Mutex, UnlockMode::Throw));
    EXPECT_EQ(backend.releases.load(), 1);
}

// Unlocking a hold already past its validity (before the expiry thread got to it, or after):
// the loss is reported once, the release is not sent, and a std guard's unlock never throws.
TEST(HoldValidityTest, AnUnlockPastTheValidityReportsTheLossAndSendsNoRelease) {
    StandIn backend;
    Reported lock;
    HoldTable table("t3", nullptr, backend);
    LockOptions o = lease_of(1000ms);
    o.on_lost = lock.callback();
    backend.sent_ago = 1000ms;  // already past its validity when acquire returns
    ASSERT_TRUE(table.lock(backend, "c", HoldKind::Mutex, SteadyTime::max(), o));
    EXPECT_TRUE(table.lost("c", HoldKind::Mutex));
    EXPECT_NO_THROW(table.unlock(backend, "c", HoldKind::Mutex, UnlockMode::Report));
    EXPECT_EQ(lock.count(), 1u);
    EXPECT_EQ(backend.releases.load(), 0);
    EXPECT_EQ(backend.abandons.load(), 1);
    // Re-entering a hold past its validity is refused, not silently counted up.
    ASSERT_TRUE(table.lock(backend, "c", HoldKind::Mutex, SteadyTime::max(), o));
    EXPECT_THROW(table.lock(backend, "c", HoldKind::Mutex, SteadyTime::max(), o), LockLostError);
    EXPECT_THROW(table.unlock(backend, "c", HoldKind::Mutex, UnlockMode::Throw), LockLostError);
    EXPECT_EQ(lock.count(), 2u);
}

// The service went: holds reported lost (ClientClosed) and given back, lock() refused at once,
// the owner's unlock() a logged no-op and unlock_checked() LockLostError.
TEST(HoldValidityTest, AClosedTableReportsItsHoldsAndRefusesNewLocks) {
    StandIn backend;
    Reported service;
    HoldTable table("t4", service.callback(), backend);
    ASSERT_TRUE(table.lock(backend, "d", HoldKind::Mutex, SteadyTime::max(), lease_of(30s)));
    ASSERT_TRUE(table.lock(backend, "e", HoldKind::Mutex, SteadyTime::max(), lease_of(30s)));
    table.close(backend);
    table.close(backend);  // idempotent
    EXPECT_EQ(service.count(), 2u);
    {
        MutexLock g(service.mu);
        for (const auto& l : service.losses) EXPECT_EQ(l.reason, LockLossReason::ClientClosed);
    }
    EXPECT_EQ(backend.abandons.load(), 2);
    EXPECT_TRUE(table.lost("d", HoldKind::Mutex));
    EXPECT_THROW(table.lock(backend, "f", HoldKind::Mutex, SteadyTime::max(), lease_of(30s)), LockClientClosedError);
    EXPECT_THROW(table.lock(backend, "d", HoldKind::Mutex, SteadyTime::max(), lease_of(30s)), LockClientClosedError);
    EXPECT_NO_THROW(table.unlock(backend, "d", HoldKind::Mutex, UnlockMode::Report));
    EXPECT_THROW(table.unlock(backend, "e", HoldKind::Mutex, UnlockMode::Throw), LockLostError);
    EXPECT_EQ(backend.acquires.load(), 2);
    EXPECT_EQ(backend.releases.load(), 0);
}

// An acquisition under way when the service goes: the lock it got is given back, never handed
// out (forced: the stand-in's acquire waits until the table is closed).
TEST(HoldValidityTest, AnAcquisitionThatEndsAfterTheCloseIsGivenBack) {
    StandIn backend;
    std::promise<void> go;
    backend.hold_acquire = go.get_future().share();
    HoldTable table("t5", nullptr, backend);
    auto acquired = backend.acquiring.get_future();
    std::string outcome = "not done";
    std::thread waiter([&] {
        try {
            table.lock(backend, "g", HoldKind::Mutex, SteadyTime::max(), lease_of(30s));
            outcome = "acquired";
        } catch (const LockClientClosedError&) {
            outcome = "closed";
        }
    });
    acquired.wait();
    table.close(backend);
    go.set_value();
    waiter.join();
    EXPECT_EQ(outcome, "closed");
    EXPECT_EQ(backend.releases.load(), 1) << "the lock got after the close was not given back";
    EXPECT_EQ(table.count("g", HoldKind::Mutex), 0);
}

// max_hold at the table: a hold valid for a whole lease is ended at its cap all the same, by the
// expiry thread: reported once (MaxHoldReached), given back (abandon), never released by the
// owner's unlock afterwards, which throws LockLostError naming the reason.
TEST(HoldValidityTest, AHoldIsEndedAtItsMaxHoldThoughItsLeaseRunsOn) {
    StandIn backend;
    Reported lock;
    HoldTable table("t6", nullptr, backend);
    LockOptions o = lease_of(30s);
    o.max_hold = 100ms;
    o.on_lost = lock.callback();
    const auto owner = locks_detail::OwnerKey::new_movable();  // a movable hold: it has a stop state
    ASSERT_TRUE(table.lock(backend, "h", HoldKind::Mutex, SteadyTime::max(), o, owner));
    auto hold = table.find("h", HoldKind::Mutex, owner);
    const SteadyTime cap = hold->cap;
    EXPECT_EQ(hold->ends_at(), cap);
    const std::stop_token stop = hold->stop.get_token();
    ASSERT_TRUE(stop.stop_possible());
    ASSERT_TRUE(eventually([&] { return lock.count() == 1; }, 5s, 1ms)) << "max_hold never ended the hold";
    {
        MutexLock g(lock.mu);
        EXPECT_EQ(lock.losses[0].reason, LockLossReason::MaxHoldReached);
        EXPECT_GE(lock.at[0], cap);
    }
    EXPECT_TRUE(stop.stop_requested());
    EXPECT_TRUE(eventually([&] { return backend.abandons.load() == 1; }, 5s, 1ms)) << "the capped hold was not given back";
    try {
        table.unlock(backend, "h", HoldKind::Mutex, UnlockMode::Throw, owner);
        ADD_FAILURE() << "unlock_checked of a capped hold did not throw";
    } catch (const LockLostError& e) {
        EXPECT_NE(std::string(e.what()).find("max hold reached"), std::string::npos) << e.what();
    }
    EXPECT_EQ(backend.releases.load(), 0);
    EXPECT_EQ(lock.count(), 1u);
}

// Owner keys: a movable owner's hold of a name is not the calling thread's (no re-entry, its own
// token), and after its checked unlock threw LockLostError nothing is absorbed for it (it
// releases once; a std guard's second unlock exists only for threads).
TEST(HoldValidityTest, AMovableOwnersHoldIsKeptApartFromTheThreadsHold) {
    StandIn backend;
    HoldTable table("t7", nullptr, backend);
    ASSERT_TRUE(table.lock(backend, "m", HoldKind::Mutex, SteadyTime::max(), lease_of(30s)));
    const auto owner = locks_detail::OwnerKey::new_movable();
    EXPECT_NE(owner.number, locks_detail::this_thread_number());
    ASSERT_TRUE(table.lock(backend, "m", HoldKind::Mutex, SteadyTime::max(), lease_of(30s), owner));
    EXPECT_EQ(backend.acquires.load(), 2) << "the movable owner re-entered the thread's hold";
    auto mine = table.find("m", HoldKind::Mutex);
    auto movable = table.find("m", HoldKind::Mutex, owner);
    ASSERT_TRUE(mine && movable);
    EXPECT_NE(mine, movable);
    EXPECT_LT(mine->token, movable->token);
    EXPECT_TRUE(movable->movable);
    table.report_lost(movable, LockLossReason::Expired, "forced");
    EXPECT_FALSE(mine->lost.load());
    EXPECT_THROW(table.unlock(backend, "m", HoldKind::Mutex, UnlockMode::Throw, owner), LockLostError);
    EXPECT_THROW(table.unlock(backend, "m", HoldKind::Mutex, UnlockMode::Report, owner), NotOwnerError);
    EXPECT_NO_THROW(table.unlock(backend, "m", HoldKind::Mutex, UnlockMode::Throw));
}

}  // namespace
}  // namespace lockstep
