// Outside DEL / HSET / PERSIST / PUBLISH on lock keys, queues, claims and channels while worker
// threads of two lock clients take the locks. The claims under attack:
//   - a holder whose hold was destroyed from outside is told (its unlock reports the loss): when
//     two threads are found inside one critical section, the earlier one's hold was reported lost;
//   - nobody hangs: every acquire succeeds within its bound (a foreign TTL-less hash costs one
//     lease, B6; an orphaned claim nothing, B1);
//   - nobody busy-loops: acquire scripts per acquisition stay small (B1, B5);
//   - unlock() never throws.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "adversary.h"
#include "locks_test_support.h"
#include "lockstep/locks/redis_mutex.h"
#include "lockstep/locks/redis_read_write_lock.h"
#include "test_servers.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(AdversarialOutsideWrites, ForeignWritesAreSurvivedAndLossesReported) {
    const std::string prefix = test::unique_prefix();
    test::LockProcess p1(prefix), p2(prefix);
    test::LockProcess outsider(prefix);  // only its RedisClient is used, for the raw commands
    const std::vector<std::string> names = {"a", "b", "c", "rw1", "rw2"};
    adversary::Tally tally("outside DEL/HSET/PERSIST/PUBLISH on lock keys and channels");
    const auto lease = 600ms;
    const auto run_for = 8s;

    // Who is inside each name's critical section, as (thread, hold number).
    std::mutex inside_mutex;
    std::map<std::string, std::vector<std::pair<int, long>>> inside;
    std::set<std::pair<int, long>> victims;  // holds found overlapped while they were inside first
    std::set<std::pair<int, long>> reported;  // holds reported lost (on_lost of the hold's thread)
    std::atomic<long> acquisitions{0}, hangs{0}, unlock_throws{0};
    std::atomic<bool> stop{false};

    std::vector<std::thread> workers;
    for (int t = 0; t < 6; ++t) {
        workers.emplace_back([&, t] {
            RedisLockClient& locks = t % 2 ? *p1.locks : *p2.locks;
            std::mt19937 rng(static_cast<unsigned>(t * 7919 + 1));
            long hold = 0;
            std::atomic<long> current{-1};
            auto on_lost = [&](const LockLoss&) {
                std::lock_guard l(inside_mutex);
                reported.insert({t, current.load()});
            };
            while (!stop.load()) {
                const std::string name = names[rng() % names.size()];
                const bool rw = name.rfind("rw", 0) == 0;
                RedisMutex m(locks, name, {.lease = lease, .on_lost = on_lost});
                RedisReadWriteLock l(locks, name, {.lease = lease, .on_lost = on_lost});
                ++hold;
                current = hold;
                bool got = false;
                try {
                    got = rw ? l.try_lock_for(5s) : m.try_lock_for(5s);
                } catch (const std::exception& e) {
                    tally.violation(std::string("acquire threw: ") + e.what());
                    continue;
                }
                if (!got) {
                    hangs.fetch_add(1);
                    tally.violation("acquire of '" + name + "' waited more than 5 s");
                    continue;
                }
                acquisitions.fetch_add(1);
                {
                    std::lock_guard lk(inside_mutex);
                    auto& in = inside[name];
                    for (const auto& other : in) victims.insert(other);  // they were there first
                    in.emplace_back(t, hold);
                }
                std::this_thread::sleep_for(std::chrono::milliseconds(3 + rng() % 10));  // inside: a target for the DELs
                {
                    std::lock_guard lk(inside_mutex);
                    auto& in = inside[name];
                    in.erase(std::remove(in.begin(), in.end(), std::make_pair(t, hold)), in.end());
                }
                try {
                    rw ? l.unlock() : m.unlock();
                } catch (const std::exception& e) {
                    unlock_throws.fetch_add(1);
                    tally.violation(std::string("unlock threw: ") + e.what());
                }
                tally.iteration();
            }
        });
    }

    // The adversary: one raw command every ~15 ms on a random name.
    long attacks = 0;
    std::mt19937 rng(4242);
    const auto end = Clock::now() + run_for;
    RedisClient& raw = *outsider.redis;
    while (Clock::now() < end) {
        const LockKeys k = p1.locks->keys(names[rng() % names.size()]);
        switch (rng() % 10) {
            case 0: raw.command({"DEL", k.mutex()}); break;
            case 1: raw.command({"HSET", k.mutex(), "intruder", "1"}); break;  // B6 on a free lock
            case 2: raw.command({"PERSIST", k.mutex()}); break;
            case 3: raw.command({"SPUBLISH", k.mutex_channel(p1.locks->id()), "garbage"}); break;  // B5
            case 4: raw.command({"DEL", k.mutex_queue_expiry()}); break;
            case 5: raw.command({"DEL", k.rw_writer()}); break;
            case 6: raw.command({"HSET", k.rw_writer(), "intruder", "1"}); break;
            case 7: raw.command({"DEL", k.rw_claim_expiry()}); break;  // B1
            case 8: raw.command({"SPUBLISH", k.rw_channel(), "nonsense"}); break;
            case 9: raw.command({"DEL", k.rw_reader_expiry(), k.fence()}); break;
        }
        ++attacks;
        std::this_thread::sleep_for(15ms);
    }
    stop = true;
    for (auto& w : workers) w.join();

    long unreported = 0;
    for (const auto& v : victims) {
        if (!reported.count(v)) {
            ++unreported;
            tally.violation("thread " + std::to_string(v.first) + " hold " + std::to_string(v.second) +
                            " was overlapped and never reported lost");
        }
    }
    const auto s1 = p1.locks->stats(), s2 = p2.locks->stats();
    const double attempts_per_acquisition =
        static_cast<double>(s1.acquire_attempts + s2.acquire_attempts) / std::max<long>(1, acquisitions.load());
    if (attempts_per_acquisition > 20) tally.violation("busy loop: " + std::to_string(attempts_per_acquisition) + " acquire scripts per acquisition");
    tally.print(std::to_string(attacks) + " attacks, " + std::to_string(acquisitions.load()) + " acquisitions, " +
                std::to_string(victims.size()) + " overlaps (all caused by the attacks) of which " +
                std::to_string(unreported) + " unreported, " + std::to_string(s1.losses + s2.losses) +
                " losses reported, " + std::to_string(attempts_per_acquisition).substr(0, 5) +
                " acquire scripts per acquisition");
    EXPECT_GT(acquisitions.load(), 100);
    EXPECT_EQ(tally.violations(), 0u);
}

}  // namespace
}  // namespace lockstep
