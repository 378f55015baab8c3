// RACES L11 behind Sentinel: a lock holder whose lock service reaches the sentinels and every
// data node through fault proxies (ProxiedLockService maps the addresses the sentinels announce
// onto the proxies, RedisOptions::address_map) is partitioned past its lease while a rival that
// reaches them directly waits. The holder's lost() turns true before the rival acquires, for the
// Redis mutex and the fair mutex alike.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include "lockstep/locks/lock_service.h"
#include "lockstep/servers/local_redis_sentinel.h"
#include "lockstep/servers/proxied_lock_service.h"
#include "test_servers.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kLease{1500};

LocalRedisSentinel& sentinel() {
    static LocalRedisSentinel s;
    return s;
}

// "redis+sentinel://..." or "redis-fair+sentinel://...".
std::string sentinel_url(const std::string& backend) {
    const std::string url = sentinel().url();  // redis+sentinel://...
    return backend == "redis" ? url : "redis-fair" + url.substr(5);
}

class SentinelNetworkFaults : public ::testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(Backends, SentinelNetworkFaults, ::testing::Values("redis", "redis-fair"),
                         [](const auto& info) { return info.param == "redis" ? std::string("redis") : "redis_fair"; });

TEST_P(SentinelNetworkFaults, HolderPartitionedPastItsLeaseLosesBeforeARivalAcquires) {
    LockServiceOptions so;
    so.prefix = test::unique_prefix();
    ProxiedLockService holder = open_proxied_lock_service(sentinel_url(GetParam()), so);
    // The sentinels (3) and the data nodes they announce (master and replica) are each proxied.
    ASSERT_EQ(holder.proxies.size(), 5u);
    auto rival_service = open_lock_service(sentinel_url(GetParam()), so);
    auto held = holder.service->make_mutex("partition", LockOptions{.lease = kLease});
    auto rival = rival_service->make_mutex("partition", LockOptions{.lease = kLease});
    // A mutex's hold belongs to the thread that locked it: that thread polls lost().
    std::promise<void> holding, cut, healed;
    std::optional<Clock::time_point> last_believed, first_lost;
    std::thread poller([&] {
        held->lock();
        holding.set_value();
        cut.get_future().wait();
        const auto give_up = Clock::now() + kLease + 20s;
        while (Clock::now() < give_up) {
            const auto before = Clock::now();
            if (held->lost()) {
                first_lost = Clock::now();
                break;
            }
            last_believed = before;
            std::this_thread::sleep_for(1ms);
        }
        healed.get_future().wait();
        held->unlock();  // reports the loss; never throws
    });
    holding.get_future().wait();
    std::uint64_t to_servers = 0;
    for (const auto& p : holder.proxies) to_servers += p->stats().bytes_to_server;
    EXPECT_GT(to_servers, 0u) << "the holder reached its servers past the proxies";

    holder.blackhole();
    const auto cut_at = Clock::now();
    cut.set_value();
    const bool acquired = rival->try_lock_for(kLease + 20s);
    const auto rival_at = Clock::now();
    holder.pass();
    healed.set_value();
    poller.join();

    ASSERT_TRUE(acquired) << "the rival never acquired";
    ASSERT_TRUE(first_lost.has_value()) << "the holder's lost() never turned true";
    ASSERT_TRUE(last_believed.has_value());
    EXPECT_LT(*last_believed, rival_at);
    std::cout << "[ measure ] " << GetParam() << " behind Sentinel: lost() true after "
              << std::chrono::duration_cast<std::chrono::milliseconds>(*first_lost - cut_at).count()
              << " ms, rival acquired after "
              << std::chrono::duration_cast<std::chrono::milliseconds>(rival_at - cut_at).count() << " ms\n";
    EXPECT_FALSE(rival->lost());
    EXPECT_NO_THROW(rival->unlock_checked());
}

}  // namespace
}  // namespace lockstep
