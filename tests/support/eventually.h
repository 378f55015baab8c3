// eventually(...): the one polling helper of the test binaries. For a state the test cannot be
// told about (a server's view of a client, a counter bumped just after the effect, a watchdog's
// renewal): each poll is a real check of that state, never a guess at a duration.
//
// Bounds are generous on purpose: CI runs every binary (and the sanitizer legs) on a loaded
// 2-core machine, where a thread may not run for hundreds of milliseconds. A bound only costs
// time when the test fails; the condition is checked once more after the deadline, so a late
// poll cannot turn a state that did arrive into a failure.
//
//   ASSERT_TRUE(eventually([&] { return follower.metrics().flushes >= 1; }, 20s));
//   EXPECT_TRUE(eventually_value([&] { return stats().losses; }, [](auto n) { return n == 1; }));
//     // on failure: "... last observed: 0"
#pragma once

#include <chrono>
#include <sstream>
#include <thread>
#include <type_traits>
#include <utility>

#include <gtest/gtest.h>

namespace lockstep::test {

inline constexpr std::chrono::milliseconds kEventuallyTimeout{10'000};
inline constexpr std::chrono::milliseconds kEventuallyInterval{5};

// true as soon as `condition()` holds; false when it still does not after `timeout`.
template <class Condition>
bool eventually(Condition&& condition, std::chrono::milliseconds timeout = kEventuallyTimeout,
                std::chrono::milliseconds interval = kEventuallyInterval) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        if (condition()) return true;
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(interval);
    }
}

// Polls `get()` until `accept(value)` holds. On failure the message carries the last value
// observed (when it can be printed), which tells a hang (still 0) from an overshoot (2 for 1).
template <class Get, class Accept>
::testing::AssertionResult eventually_value(Get&& get, Accept&& accept,
                                            std::chrono::milliseconds timeout = kEventuallyTimeout,
                                            std::chrono::milliseconds interval = kEventuallyInterval) {
    auto last = get();
    const bool ok = eventually(
        [&] {
            last = get();
            return static_cast<bool>(accept(last));
        },
        timeout, interval);
    if (ok) return ::testing::AssertionSuccess();
    auto failure = ::testing::AssertionFailure();
    failure << "not reached within " << timeout.count() << " ms";
    if constexpr (requires(std::ostream& os) { os << last; }) failure << "; last observed: " << last;
    return failure;
}

}  // namespace lockstep::test
