// The lock layer's debug and trace lines (locks/src/lock_log.h): one lock cycle at debug shows
// each of its steps, on the Redis client and on a hold-table backend alike.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include <spdlog/sinks/ostream_sink.h>

#include "lockstep/core/logging.h"
#include "lockstep/locks/lock_service.h"
#include "test_servers.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

// Captures the lockstep logger's lines at `level` for the scope of the object.
class CapturedLog {
public:
    explicit CapturedLog(spdlog::level::level_enum level) {
        auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
        auto l = std::make_shared<spdlog::logger>("lockstep", sink);
        l->set_level(level);
        l->set_pattern("%l %v");
        set_logger(l);
    }
    ~CapturedLog() { set_logger(nullptr); }
    std::string text() const { return out_.str(); }

private:
    std::ostringstream out_;
};

void expect_cycle_logged(const std::string& log, const std::string& name, const std::string& tag) {
    const std::string head = "debug lock '" + name + "' [" + tag + "]: ";
    EXPECT_NE(log.find(head + "acquire started"), std::string::npos) << log;
    EXPECT_NE(log.find(head + "granted after "), std::string::npos) << log;
    EXPECT_NE(log.find(", token "), std::string::npos) << log;
    EXPECT_NE(log.find(head + "released after holding "), std::string::npos) << log;
}

TEST(LockLog, OneRedisLockCycleAtDebugShowsEachStep) {
    auto locks = open_lock_service(servers().redis_url());
    auto mutex = locks->make_mutex("log-cycle", LockOptions{.lease = 300ms});
    CapturedLog log(spdlog::level::trace);
    {
        std::unique_lock hold(*mutex);
        std::this_thread::sleep_for(250ms);  // past lease/3: the watchdog renews once
    }
    expect_cycle_logged(log.text(), "log-cycle", "redis mutex");
    EXPECT_NE(log.text().find("trace lock 'log-cycle' [redis mutex]: renewed, lease 300 ms"), std::string::npos)
        << log.text();
}

TEST(LockLog, AGiveUpIsLoggedWithTheTimeWaited) {
    auto locks = open_lock_service(servers().redis_url());
    auto holder = locks->make_mutex("log-give-up");
    std::unique_lock hold(*holder);
    CapturedLog log(spdlog::level::debug);
    std::thread([&] {
        auto other = locks->make_mutex("log-give-up");
        EXPECT_FALSE(other->try_lock_for(50ms));
    }).join();
    EXPECT_NE(log.text().find("debug lock 'log-give-up' [redis mutex]: gave up after "), std::string::npos) << log.text();
}

TEST(LockLog, OneHoldTableLockCycleAtDebugShowsEachStep) {
    auto locks = open_lock_service("memory:");
    auto mutex = locks->make_mutex("log-cycle");
    CapturedLog log(spdlog::level::debug);
    { std::unique_lock hold(*mutex); }
    expect_cycle_logged(log.text(), "log-cycle", "memory mutex");
}

TEST(LockLog, NothingIsFormattedAboveDebug) {
    auto locks = open_lock_service("memory:");
    auto mutex = locks->make_mutex("log-quiet");
    CapturedLog log(spdlog::level::info);
    { std::unique_lock hold(*mutex); }
    EXPECT_EQ(log.text(), "");
}

}  // namespace
}  // namespace lockstep::test
