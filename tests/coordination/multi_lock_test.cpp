// MultiLock over the real backends: a fixed order over several names never deadlocks against the
// opposite order, never lets two holders overlap, and a failure midway leaves nothing held; the
// same for MultiHold, the movable value of all the names, which also reports a lost part.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <iostream>
#include <stop_token>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends.h"
#include "eventually.h"
#include "lockstep/coordination/multi_lock.h"
#include "lockstep/core/error.h"
#include "lockstep/locks/hold.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string fresh_prefix() {
    static std::atomic<int> n{0};
    return "ml" + std::to_string(::getpid()) + "_" + std::to_string(n.fetch_add(1)) + ":";
}

// Holds one name on its own thread (a mutex's hold belongs to the thread that took it) until told
// to let go: the third party of the midway-failure tests.
class ThirdParty {
public:
    ThirdParty(LockService& service, std::string name) {
        std::promise<void> held;
        auto held_future = held.get_future();
        thread_ = std::thread([this, &service, name, held = std::move(held)]() mutable {
            auto m = service.make_mutex(name);
            m->lock();
            held.set_value();
            release_.get_future().wait();
            m->unlock();
        });
        held_future.wait();
    }
    ~ThirdParty() { let_go(); }
    void let_go() {
        if (!thread_.joinable()) return;
        release_.set_value();
        thread_.join();
    }

private:
    std::promise<void> release_;
    std::thread thread_;
};

// Whether `name` can be taken right now by a thread of `service` that holds nothing.
bool free_now(LockService& service, const std::string& name) {
    bool free = false;
    std::thread([&] {
        auto m = service.make_mutex(name);
        free = m->try_lock();
        if (free) m->unlock();
    }).join();
    return free;
}

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// Whether `token` is requested within `bound`, woken by its own stop callback (not polled).
bool stop_requested_within(const std::stop_token& token, std::chrono::milliseconds bound) {
    std::promise<void> requested;
    auto done = requested.get_future();
    std::stop_callback on_stop(token, [&requested] { requested.set_value(); });
    return done.wait_for(bound) == std::future_status::ready;
}

class MultiLockTest : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        if (backend_url(GetParam()).empty()) GTEST_SKIP() << GetParam() << " is not available here";
        traits_ = backend_traits(GetParam());
        prefix_ = fresh_prefix();
    }
    std::unique_ptr<LockService> open() { return open_backend(GetParam(), prefix_); }
    // Another "process": its own service, except in memory, where threads stand for processes.
    LockService& other(LockService& first) {
        if (!traits_.cross_process) return first;
        if (!second_) second_ = open();
        return *second_;
    }

    // Two threads, one per service, take {a, b} and {b, a} through `cycle` until `max_cycles` are
    // done or `budget` has passed: neither order may deadlock nor may both hold at once.
    // `cycle(both, inside)` takes both names (false: not within its wait; a deadlock shows as such
    // a timeout, counted, never as a hung test), runs `inside` while it holds them and gives them
    // back. `what` names the cycle in the measurement line.
    template <class Cycle>
    void expect_opposite_orders_neither_deadlock_nor_overlap(LockService& first, LockService& second,
                                                             long max_cycles, std::chrono::seconds budget,
                                                             const std::string& what, Cycle cycle) {
        std::atomic<int> in_a{0}, in_b{0};
        std::atomic<int> overlaps{0}, timeouts{0}, errors{0};
        std::atomic<long> cycles{0};
        const auto until = Clock::now() + budget;
        const auto inside = [&] {
            if (in_a.fetch_add(1) != 0) overlaps.fetch_add(1);
            if (in_b.fetch_add(1) != 0) overlaps.fetch_add(1);
            std::this_thread::yield();
            in_b.fetch_sub(1);
            in_a.fetch_sub(1);
        };
        auto worker = [&](LockService& service, std::vector<std::string> names) {
            MultiLock both(service, std::move(names));
            while (Clock::now() < until && cycles.load() < max_cycles) {
                try {
                    if (!cycle(both, inside)) {
                        timeouts.fetch_add(1);
                        continue;
                    }
                    cycles.fetch_add(1);
                } catch (const std::exception& e) {
                    std::cerr << what << " cycle failed: " << e.what() << "\n";
                    errors.fetch_add(1);
                }
            }
        };
        std::thread t1(worker, std::ref(first), std::vector<std::string>{"a", "b"});
        std::thread t2(worker, std::ref(second), std::vector<std::string>{"b", "a"});
        t1.join();
        t2.join();
        std::cout << "[ measure ] " << GetParam() << ": " << cycles.load() << " " << what
                  << " cycles over {a, b} / {b, a}, two threads\n";
        EXPECT_EQ(overlaps.load(), 0);
        EXPECT_EQ(timeouts.load(), 0);
        EXPECT_EQ(errors.load(), 0);
        EXPECT_GT(cycles.load(), 100);
    }

    BackendTraits traits_;
    std::string prefix_;
    std::unique_ptr<LockService> second_;
};

TEST_P(MultiLockTest, OppositeOrdersNeitherDeadlockNorOverlap) {
    auto first = open();
    // 4000 cycles, or as many as 10 s allow on a slow machine (a sanitizer build).
    expect_opposite_orders_neither_deadlock_nor_overlap(*first, other(*first), 4000, 10s, "MultiLock",
                                                        [](MultiLock& both, const auto& inside) {
                                                            if (!both.try_lock_for(5s)) return false;
                                                            std::scoped_lock adopted(std::adopt_lock, both);
                                                            inside();
                                                            return true;
                                                        });
}

TEST_P(MultiLockTest, AFailureMidwayReleasesTheNamesAlreadyTaken) {
    auto service = open();
    LockService& outsider = other(*service);
    ThirdParty holder(outsider, "b");

    MultiLock abc(*service, {"c", "a", "b"});
    ASSERT_EQ(abc.names(), (std::vector<std::string>{"a", "b", "c"}));
    EXPECT_FALSE(abc.try_lock());
    EXPECT_TRUE(free_now(outsider, "a"));
    EXPECT_FALSE(abc.try_lock_for(300ms));
    EXPECT_TRUE(free_now(outsider, "a"));
    EXPECT_TRUE(free_now(outsider, "c"));
    EXPECT_FALSE(abc.held_by_this_thread());

    MultiLock bounded(*service, {"a", "b", "c"}, {.max_wait = 300ms});
    EXPECT_THROW(bounded.lock(), TimeoutError);
    EXPECT_TRUE(free_now(outsider, "a"));

    holder.let_go();
    {
        std::scoped_lock all(abc);
        EXPECT_TRUE(abc.held_by_this_thread());
        EXPECT_FALSE(abc.lost());
        EXPECT_GT(abc.fence_token("a"), 0);
        EXPECT_GT(abc.fence_token("c"), 0);
        EXPECT_THROW((void)abc.fence_token("d"), ConfigError);
        EXPECT_FALSE(free_now(outsider, "a"));
        EXPECT_FALSE(free_now(outsider, "c"));
    }
    EXPECT_TRUE(free_now(outsider, "a"));
    EXPECT_TRUE(free_now(outsider, "b"));
    EXPECT_TRUE(free_now(outsider, "c"));
}

// A MultiHold is owned by no thread: taken on one, released on another, and while it is held
// every name is taken for everybody else.
TEST_P(MultiLockTest, AMultiHoldAcquiredOnOneThreadIsReleasedOnAnother) {
    auto service = open();
    LockService& outsider = other(*service);
    MultiLock abc(*service, {"c", "a", "b"});
    MultiHold all;
    std::thread([&] { all = abc.acquire(); }).join();
    ASSERT_TRUE(all.held());
    EXPECT_EQ(all.names(), (std::vector<std::string>{"a", "b", "c"}));
    EXPECT_GT(all.fence_token("a"), 0);
    EXPECT_GT(all.fence_token("c"), 0);
    EXPECT_THROW((void)all.fence_token("d"), ConfigError);
    EXPECT_FALSE(all.lost());
    EXPECT_TRUE(all.stop_token().stop_possible());
    EXPECT_FALSE(all.stop_token().stop_requested());
    for (const char* name : {"a", "b", "c"}) EXPECT_FALSE(free_now(outsider, name)) << name;
    const std::stop_token stop = all.stop_token();

    std::thread([held = std::move(all)]() mutable { EXPECT_NO_THROW(held.release_checked()); }).join();
    for (const char* name : {"a", "b", "c"}) EXPECT_TRUE(free_now(outsider, name)) << name;
    EXPECT_FALSE(stop.stop_requested()) << "a release is no loss";

    // Empty (moved from): the Hold contract.
    EXPECT_FALSE(all.held());
    EXPECT_TRUE(all.names().empty());
    EXPECT_FALSE(all.lost());
    EXPECT_FALSE(all.stop_token().stop_possible());
    EXPECT_THROW(all.release(), NotOwnerError);
    EXPECT_THROW(all.release_checked(), NotOwnerError);
    EXPECT_THROW((void)all.fence_token("a"), NotOwnerError);

    // Tokens are new for every acquisition; the destructor releases.
    {
        MultiHold again = abc.try_acquire_for(5s);
        ASSERT_TRUE(again);
        EXPECT_GT(again.fence_token("a"), 0);
    }
    for (const char* name : {"a", "b", "c"}) EXPECT_TRUE(free_now(outsider, name)) << name;
}

// Each part of a MultiHold has an owner of its own: the thread that made it, the same MultiLock,
// and a Hold of one of its names are all other owners and do not get in.
TEST_P(MultiLockTest, AMultiHoldIsNeverReentrant) {
    auto service = open();
    MultiLock ab(*service, {"a", "b"});
    auto a = service->make_mutex("a");
    MultiHold first = ab.try_acquire();
    ASSERT_TRUE(first);
    EXPECT_FALSE(ab.try_acquire()) << "a second MultiHold of the same names, on the same thread";
    EXPECT_FALSE(ab.try_lock()) << "the thread that made the MultiHold, through lock()";
    EXPECT_FALSE(a->try_acquire()) << "a Hold of one of its names";
    first.release_checked();
    EXPECT_TRUE(ab.try_lock());
    EXPECT_FALSE(ab.try_acquire()) << "the thread holding the names through lock() waits for a MultiHold too";
    ab.unlock();
}

// All or nothing: when one name is busy, try_acquire*() returns an empty MultiHold and the names
// taken before it are given back; acquire() under max_wait throws and holds nothing.
TEST_P(MultiLockTest, AMultiHoldIsAllOrNothingWhenOneNameIsBusy) {
    auto service = open();
    LockService& outsider = other(*service);
    ThirdParty holder(outsider, "b");
    MultiLock abc(*service, {"a", "b", "c"});
    EXPECT_FALSE(abc.try_acquire());
    EXPECT_TRUE(free_now(outsider, "a"));
    const auto started = Clock::now();
    MultiHold none = abc.try_acquire_for(300ms);
    EXPECT_GE(ms_since(started), 290.0);
    EXPECT_FALSE(none.held());
    EXPECT_TRUE(free_now(outsider, "a"));
    EXPECT_TRUE(free_now(outsider, "c"));

    MultiLock bounded(*service, {"a", "b", "c"}, {.max_wait = 300ms});
    EXPECT_THROW((void)bounded.acquire(), TimeoutError);
    EXPECT_TRUE(free_now(outsider, "a"));

    holder.let_go();
    MultiHold all = abc.try_acquire_for(5s);
    EXPECT_TRUE(all.held());
}

// One part lost (forced the way the backend loses holds): the MultiHold is lost, its stop token
// is requested, and release_checked() names the lost part and still gives back the others.
TEST_P(MultiLockTest, ALostPartMakesTheMultiHoldLostAndRequestsItsStopToken) {
    std::atomic<int> losses{0};
    LockOptions options = traits_.short_lease;
    options.on_lost = [&](const LockLoss&) { losses.fetch_add(1); };
    auto service = open();
    LockService& outsider = other(*service);
    MultiLock ab(*service, {"a", "b"}, options);
    MultiHold both = ab.acquire();
    const std::stop_token stop = both.stop_token();
    EXPECT_FALSE(stop.stop_requested());
    const auto t0 = Clock::now();
    force_loss(GetParam(), *service, prefix_, "b");
    ASSERT_TRUE(stop_requested_within(stop, traits_.kill_bound + 10s)) << "the stop token was never requested";
    std::cout << "[ measure ] " << GetParam() << ": a MultiHold's stop token requested " << ms_since(t0)
              << " ms after one part was lost\n";
    EXPECT_TRUE(both.lost());
    EXPECT_TRUE(eventually([&] { return losses.load() >= 1; }, 10s));
    try {
        both.release_checked();
        ADD_FAILURE() << "release_checked() of a lost MultiHold did not throw";
    } catch (const LockLostError& e) {
        EXPECT_NE(std::string(e.what()).find("b ("), std::string::npos) << e.what();
    }
    EXPECT_FALSE(both.held());
    EXPECT_TRUE(eventually([&] { return free_now(outsider, "a") && free_now(outsider, "b"); }, 10s));
}

// max_hold caps every part: at the cap the MultiHold is lost and its stop token requested.
TEST_P(MultiLockTest, AMultiHoldThatReachesMaxHoldRequestsItsStopToken) {
    std::atomic<int> capped{0};
    LockOptions options = traits_.short_lease;
    options.max_hold = 300ms;
    options.on_lost = [&](const LockLoss& l) {
        if (l.reason == LockLossReason::MaxHoldReached) capped.fetch_add(1);
    };
    auto service = open();
    MultiLock ab(*service, {"a", "b"}, options);
    const auto t0 = Clock::now();
    MultiHold both = ab.acquire();
    ASSERT_TRUE(stop_requested_within(both.stop_token(), 10s)) << "max_hold did not request the stop token";
    EXPECT_GE(ms_since(t0), 295.0);
    EXPECT_TRUE(both.lost());
    EXPECT_TRUE(eventually([&] { return capped.load() == 2; }, 10s)) << "each part reports its cap once";
    EXPECT_THROW(both.release_checked(), LockLostError);
    EXPECT_TRUE(ab.try_acquire_for(5s).held()) << "the names were given back at the cap";
}

TEST_P(MultiLockTest, OppositeOrdersAsMultiHoldsNeitherDeadlockNorOverlap) {
    auto first = open();
    expect_opposite_orders_neither_deadlock_nor_overlap(*first, other(*first), 2000, 8s, "MultiHold",
                                                        [](MultiLock& both, const auto& inside) {
                                                            MultiHold held = both.try_acquire_for(5s);
                                                            if (!held) return false;
                                                            inside();
                                                            held.release_checked();
                                                            return true;
                                                        });
}

TEST_P(MultiLockTest, UnlockByAThreadThatHoldsNothingIsRefused) {
    auto service = open();
    MultiLock ab(*service, {"a", "b"});
    EXPECT_THROW(ab.unlock(), NotOwnerError);
    EXPECT_THROW(MultiLock(*service, {}), ConfigError);
}

INSTANTIATE_TEST_SUITE_P(Backends, MultiLockTest, ::testing::ValuesIn(every_backend()),
                         [](const auto& info) { return backend_test_name(info.param); });

}  // namespace
}  // namespace lockstep::test
