// What only the MySQL backend has to get right: long names and waits longer than the read timeout.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <thread>

#include "lockstep/core/names.h"
#include "lockstep/db/mysql_connection.h"

#include "lockstep/locks/mysql_lock_service.h"
#include "test_servers.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

TEST(MysqlLock, LongNamesAreShortenedAndStillExclusive) {
    LockServiceOptions o;
    o.prefix = "ml:";
    MysqlLockService a(servers().mysql_options(), o), b(servers().mysql_options(), o);
    const std::string long_name(kMaxNameLength, 'x');  // the longest name of the rule (core/names.h)
    EXPECT_LE(a.lock_name(long_name).size(), 64u);
    EXPECT_NE(a.lock_name(long_name), a.lock_name(long_name.substr(1) + "y"));
    auto m = a.make_mutex(long_name);
    std::unique_lock hold(*m);
    bool got = true;
    std::thread([&] { got = b.make_mutex(long_name)->try_lock(); }).join();
    EXPECT_FALSE(got);
}

TEST(MysqlLock, WaitsLongerThanTheReadTimeoutAreChunked) {
    // A single GET_LOCK wait of 3 s would end in error 2013 with a 1.5 s read timeout.
    auto options = servers().mysql_options();
    options.read_timeout = 1500ms;
    LockServiceOptions o;
    o.prefix = "mc:";
    MysqlLockService a(options, o), b(options, o);
    auto m = a.make_mutex("chunked");
    std::unique_lock hold(*m);
    std::thread([&] {
        const auto t0 = std::chrono::steady_clock::now();
        EXPECT_FALSE(b.make_mutex("chunked")->try_lock_for(3s));
        EXPECT_GE(std::chrono::steady_clock::now() - t0, 2900ms);
    }).join();
    EXPECT_GE(b.stats().wait_chunks, 2u);
}

// The floor the MySQL lock cycle is compared with: GET_LOCK + RELEASE_LOCK on one connection.
TEST(MysqlLock, RawFloorIsMeasured) {
    MysqlConnection c(servers().mysql_options());
    std::vector<double> cycles;
    for (int i = 0; i < 200; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        c.query_one("SELECT GET_LOCK(?, 0) AS got", {std::string("raw-floor")});
        c.query_one("SELECT RELEASE_LOCK(?) AS released", {std::string("raw-floor")});
        cycles.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(cycles.begin(), cycles.end());
    std::cout << "[ measure ] mysql raw GET_LOCK+RELEASE_LOCK p50 " << cycles[100] << " ms\n";
    EXPECT_GT(cycles[100], 0.0);
}

}  // namespace
}  // namespace lockstep::test
