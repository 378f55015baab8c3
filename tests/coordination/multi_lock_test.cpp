// MultiLock over the real backends: a fixed order over several names never deadlocks against the
// opposite order, never lets two holders overlap, and a failure midway leaves nothing held.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends.h"
#include "lockstep/coordination/multi_lock.h"
#include "lockstep/core/error.h"

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

    BackendTraits traits_;
    std::string prefix_;
    std::unique_ptr<LockService> second_;
};

TEST_P(MultiLockTest, OppositeOrdersNeitherDeadlockNorOverlap) {
    auto first = open();
    LockService& second = other(*first);
    std::atomic<int> in_a{0}, in_b{0};
    std::atomic<int> overlaps{0}, timeouts{0}, errors{0};
    std::atomic<long> cycles{0};
    // 4000 cycles, or as many as 10 s allow on a slow machine (a sanitizer build).
    constexpr long kCycles = 4000;
    const auto until = Clock::now() + 10s;
    auto worker = [&](LockService& service, std::vector<std::string> names) {
        MultiLock both(service, std::move(names));
        while (Clock::now() < until && cycles.load() < kCycles) {
            try {
                // A deadlock shows as a timeout here (counted), never as a hung test.
                if (!both.try_lock_for(5s)) {
                    timeouts.fetch_add(1);
                    continue;
                }
                std::scoped_lock adopted(std::adopt_lock, both);
                if (in_a.fetch_add(1) != 0) overlaps.fetch_add(1);
                if (in_b.fetch_add(1) != 0) overlaps.fetch_add(1);
                std::this_thread::yield();
                in_b.fetch_sub(1);
                in_a.fetch_sub(1);
                cycles.fetch_add(1);
            } catch (const std::exception& e) {
                std::cerr << "MultiLock cycle failed: " << e.what() << "\n";
                errors.fetch_add(1);
            }
        }
    };
    std::thread t1(worker, std::ref(*first), std::vector<std::string>{"a", "b"});
    std::thread t2(worker, std::ref(second), std::vector<std::string>{"b", "a"});
    t1.join();
    t2.join();
    std::cout << "[ measure ] " << GetParam() << ": " << cycles.load()
              << " MultiLock cycles over {a, b} / {b, a}, two threads\n";
    EXPECT_EQ(overlaps.load(), 0);
    EXPECT_EQ(timeouts.load(), 0);
    EXPECT_EQ(errors.load(), 0);
    EXPECT_GT(cycles.load(), 100);
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
