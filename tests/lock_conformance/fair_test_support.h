// Helpers shared by the fair Redis mutex's tests (fair_lock_test.cpp, fair_grant_test.cpp).
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "lockstep/locks/redis_fair_lock_service.h"

namespace lockstep::test {

// A key prefix unique to this process and call: "<what><pid>_<n>:".
inline std::string fair_test_prefix(const std::string& what) {
    static std::atomic<int> n{0};
    return what + std::to_string(::getpid()) + "_" + std::to_string(n.fetch_add(1)) + ":";
}

// Waits (bounded, 10 s) until `name`'s line is `n` long: the waiters' arrival is then decided.
inline bool line_reaches(RedisFairLockService& s, const std::string& name, long long n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (s.queue_length(name) < n) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
}

}  // namespace lockstep::test
