// Eviction of lock keys and claims under a small maxmemory (B3). The lock client is told to
// accept the evicting server (EvictionCheck::Warn, the explicit downgrade), so the damage
// happens: the claim under attack is that it is DETECTED. Every hold whose key was evicted must
// be reported lost (lost(), on_lost) before the holder looks again a lease later, and waiters
// whose claims were evicted must still get the lock (no livelock, B1).
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "adversary.h"
#include "lockstep/locks/redis_mutex.h"
#include "lockstep/locks/redis_read_write_lock.h"
#include "lockstep/servers/local_servers.h"
#include "redis_hold_owner.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

long long info_stat(RedisClient& redis, const std::string& field) {
    const std::string info = redis.command({"INFO", "stats"}).str();
    auto at = info.find(field + ":");
    if (at == std::string::npos) return 0;
    return std::stoll(info.substr(at + field.size() + 1));
}

TEST(AdversarialEviction, EvictedLockKeysAreDetectedAndReported) {
    LocalServersOptions so;
    so.mysql = false;
    so.use_environment = false;
    so.redis_extra_args = {"--maxmemory", "6mb", "--maxmemory-policy", "allkeys-random"};
    LocalServers server(so);
    RedisOptions ro = server.redis_options();
    ro.pool_size = 8;
    RedisClient redis(ro);
    RedisClient filler(ro);
    std::atomic<int> reported{0};
    LockClientOptions lo;
    lo.prefix = "adv:";
    lo.eviction_check = EvictionCheck::Warn;  // the explicit downgrade: run on an evicting server
    lo.claim_refresh = 500ms;
    lo.waiter_grace = 300ms;
    lo.on_lost = [&](const LockLoss&) { reported.fetch_add(1); };
    RedisLockClient locks(redis, lo);
    ASSERT_TRUE(locks.eviction_possible());

    adversary::Tally tally("eviction of lock keys and claims (6 MB, allkeys-random)");
    constexpr int kMutexes = 20, kReaders = 10, kRounds = 3;
    const auto lease = 900ms;
    long long evicted_holds = 0, false_alarms = 0, waiters_through = 0;
    for (int round = 0; round < kRounds; ++round) {
        redis.command({"FLUSHALL"});
        std::atomic<int> phase{0};  // 0 locking, 1 held, 2 check, 3 done
        std::vector<std::string> owners_gone;
        // One thread holds every lock of the round (holds belong to their thread).
        std::thread holder([&] {
            std::vector<std::unique_ptr<RedisMutex>> mutexes;
            std::vector<std::unique_ptr<RedisReadWriteLock>> readers;
            for (int i = 0; i < kMutexes; ++i) {
                mutexes.push_back(std::make_unique<RedisMutex>(locks, "m" + std::to_string(i), MutexOptions{.lease = lease}));
                mutexes.back()->lock();
            }
            for (int i = 0; i < kReaders; ++i) {
                readers.push_back(std::make_unique<RedisReadWriteLock>(locks, "r" + std::to_string(i),
                                                                       ReadWriteLockOptions{.lease = lease}));
                readers.back()->lock_shared();
            }
            RedisReadWriteLock contested(locks, "contested", {.lease = lease});
            contested.lock();
            phase = 1;
            while (phase.load() < 2) std::this_thread::sleep_for(5ms);
            const std::string owner = locks.owner_of_this_thread();
            auto check = [&](bool present, bool lost, const std::string& what) {
                tally.iteration();
                if (!present) ++evicted_holds;
                if (!present && !lost) tally.violation("round " + std::to_string(round) + ": " + what + " evicted, not reported");
                if (present && lost) ++false_alarms;
            };
            for (auto& m : mutexes) {
                const bool present = !test::hold_owner_in(redis, m->keys().mutex(), owner).empty();
                check(present, m->lost(), "mutex " + m->name());
            }
            for (auto& r : readers) {
                const bool present = !test::hold_owner_in(redis, r->keys().rw_readers(), owner).empty() &&
                                     !test::hold_owner_in(redis, r->keys().rw_reader_expiry(), owner, true).empty();
                check(present, r->lost(), "read hold " + r->name());
            }
            for (auto& m : mutexes) m->unlock();  // never throws, lost or not
            for (auto& r : readers) r->unlock_shared();
            contested.unlock();
            phase = 3;
        });
        while (phase.load() < 1) std::this_thread::sleep_for(5ms);
        // Two writers wait on "contested": their claims live in the evictable zsets too.
        std::atomic<int> through{0};
        std::vector<std::thread> waiters;
        for (int w = 0; w < 2; ++w) {
            waiters.emplace_back([&] {
                RedisReadWriteLock rw(locks, "contested", {.lease = lease});
                if (rw.try_lock_for(8s)) {
                    through.fetch_add(1);
                    rw.unlock();
                }
            });
        }
        std::this_thread::sleep_for(100ms);
        // Fill until the server has evicted plenty (random keys: lock keys among them).
        const long long evicted_before = info_stat(filler, "evicted_keys");
        const std::string junk(16 * 1024, 'x');
        const auto fill_until = Clock::now() + 1500ms;
        int written = 0;
        auto junk_key = [&](int n) { return "junk:" + std::to_string(round) + ":" + std::to_string(n); };
        while (Clock::now() < fill_until && info_stat(filler, "evicted_keys") - evicted_before < 400) {
            for (int k = 0; k < 20; ++k) filler.command({"SET", junk_key(written++), junk});
        }
        const long long evicted = info_stat(filler, "evicted_keys") - evicted_before;
        // Free the memory again, so no eviction happens between the holders' last renewal and
        // the check below (that would be a loss nobody could have seen yet).
        for (int n = 0; n < written; n += 100) {
            std::vector<std::string> del{"DEL"};
            for (int k = n; k < std::min(written, n + 100); ++k) del.push_back(junk_key(k));
            filler.command(del);
        }
        std::this_thread::sleep_for(lease);  // a lease later: every renewal has run at least twice
        phase = 2;
        holder.join();
        for (auto& t : waiters) t.join();
        waiters_through += through.load();
        if (through.load() != 2) tally.violation("round " + std::to_string(round) + ": a waiter whose claim may have been evicted never got the lock");
        std::cout << "[ measure  ] round " << round << ": " << evicted << " keys evicted\n";
    }
    tally.print(std::to_string(evicted_holds) + " holds evicted and reported, " + std::to_string(false_alarms) +
                " reported lost while present, " + std::to_string(reported.load()) + " on_lost calls, " +
                std::to_string(waiters_through) + "/" + std::to_string(2 * kRounds) + " waiters through");
    EXPECT_GT(evicted_holds, 0) << "the attack must evict some lock keys to show anything";
    EXPECT_EQ(tally.violations(), 0u);
}

}  // namespace
}  // namespace lockstep
