// Random SIGSTOP of lock holders (real child processes), with fenced writes. The claim under
// attack (L5, L8): a holder frozen past its lease may wake up believing it holds the lock, but
// its late write is refused once a newer holder wrote, and it learns of the loss.
#include <gtest/gtest.h>
#include <signal.h>

#include <random>
#include <thread>

#include "adversary.h"
#include "locks_test_support.h"
#include "lockstep/core/error.h"
#include "lockstep/db/fenced_write.h"
#include "lockstep/locks/redis_mutex.h"
#include "test_servers.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;

TEST(AdversarialSigstop, FrozenHoldersLateFencedWritesAreRefused) {
    MysqlPool pool(test::servers().mysql_options());
    adversary::create_tables(pool);
    const std::string prefix = test::unique_prefix();
    const long long row = 1000 + ::getpid() % 100000;
    pool.execute("REPLACE INTO adv_fenced (id, name, fence) VALUES (?, 'start', 0)", {row});
    test::LockProcess parent(prefix);
    adversary::Tally tally("random SIGSTOP of holders, fenced writes");
    std::mt19937 rng(1234);
    const long long lease_ms = 600;
    int overtaken = 0, refused = 0, child_lost = 0;
    for (int i = 0; i < 8; ++i) {
        test::Child child("fenced_holder", {{"PREFIX", prefix}, {"NAME", "stock"}, {"LEASE_MS", std::to_string(lease_ms)}});
        auto held = child.expect("HELD ", 10s);
        ASSERT_TRUE(held) << "child never held the lock";
        const FenceToken child_token = std::stoll(held->substr(5));
        // Half the stops outlast the lease (the lock moves on), half do not (it must not).
        const long long stop_ms = rng() % 2 ? 150 + rng() % 200 : lease_ms + 300 + rng() % 500;
        child.signal(SIGSTOP);
        std::this_thread::sleep_for(std::chrono::milliseconds(stop_ms));
        RedisMutex m(*parent.locks, "stock", {.lease = 5000ms});
        const bool took = m.try_lock_for(stop_ms > lease_ms ? 2000ms : 0ms);
        if (took) {
            ++overtaken;
            if (m.fence_token() <= child_token) tally.violation("token did not increase");
            FencedUpdate u;
            u.assignments = "name = ?";
            u.params = {"parent-" + std::to_string(i)};
            u.table = "adv_fenced";
            if (!fenced_update(pool, row, m.fence_token(), u)) tally.violation("the newer holder's write did not apply");
        } else if (stop_ms > lease_ms + 200) {
            tally.violation("a frozen holder past its lease still blocked the lock");
        }
        child.signal(SIGCONT);
        child.send("WRITE " + std::to_string(row) + " child-" + std::to_string(i));
        const std::string answer = child.expect("WRITE", 10s).value_or("WRITE TIMEOUT");
        if (took) {
            if (answer.rfind("WRITE REFUSED", 0) == 0) {
                ++refused;
            } else {
                tally.violation("iteration " + std::to_string(i) + ": the frozen holder's late write: " + answer);
            }
        } else if (answer != "WRITE OK") {
            tally.violation("iteration " + std::to_string(i) + ": the live holder's write: " + answer);
        }
        const auto name = pool.query_one("SELECT name FROM adv_fenced WHERE id = ?", {row})->get<std::string>("name");
        const std::string expected = (took ? "parent-" : "child-") + std::to_string(i);
        if (name != expected) tally.violation("row holds '" + name + "', expected '" + expected + "'");
        if (took) m.unlock();
        child.send("UNLOCK");
        const std::string lost = child.expect("LOST", 10s).value_or("LOST ?");
        if (took && lost != "LOST 1") tally.violation("the frozen holder did not learn it lost the lock: " + lost);
        if (lost == "LOST 1") ++child_lost;
        if (child.wait() != 0) tally.violation("child exited abnormally");
        tally.iteration();
    }
    tally.print(std::to_string(overtaken) + " holders overtaken while frozen, " + std::to_string(refused) +
                " late writes refused, " + std::to_string(child_lost) + " reported lost by the frozen holder");
    EXPECT_GT(overtaken, 0);
    EXPECT_EQ(tally.violations(), 0u);
}

}  // namespace
}  // namespace lockstep
