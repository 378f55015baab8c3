// Follower lag, measured: COMMIT returned -> the key is gone from Redis, over many single-row
// updates made by a plain client connection (no library code on the write path). Prints p50 /
// p99 / max; asserts only that every key went (the figures go to docs/invalidation.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "invalidation_test_support.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

TEST(FollowerLag, CommitToKeyGoneOverManyUpdates) {
    const int updates = std::getenv("LOCKSTEP_LAG_UPDATES") ? std::atoi(std::getenv("LOCKSTEP_LAG_UPDATES")) : 2000;
    const std::string prefix = fresh_prefix();
    const std::int64_t id = fresh_id();
    db().execute("INSERT INTO products (id, name, price, stock, version) VALUES (?, 'lag', 1, 1, 1)", {id});
    BinlogInvalidator follower(servers().mysql_options(), redis(), products_map(prefix), follower_options("lag-" + prefix));
    follower.start();
    ASSERT_TRUE(follower.wait_caught_up(10s));
    const InvalidationMap map = products_map(prefix);
    const std::string key = map.key(map.bindings()[0], id);
    auto conn = db().acquire();
    std::vector<double> lag_us;
    lag_us.reserve(static_cast<std::size_t>(updates));
    int missed = 0;
    for (int i = 0; i < updates; ++i) {
        redis().set(key, "v1:x", 60s);
        conn->execute("UPDATE products SET price = ?, version = version + 1 WHERE id = ?", {std::int64_t{i}, id});
        auto gone = time_until_gone(key, 5s);
        if (!gone) {
            ++missed;
            continue;
        }
        lag_us.push_back(static_cast<double>(gone->count()));
    }
    db().execute("DELETE FROM products WHERE id = ?", {id});
    EXPECT_EQ(missed, 0);
    ASSERT_FALSE(lag_us.empty());
    std::sort(lag_us.begin(), lag_us.end());
    auto at = [&](double q) { return lag_us[std::min(lag_us.size() - 1, static_cast<std::size_t>(q * static_cast<double>(lag_us.size())))]; };
    auto m = follower.metrics();
    std::printf("follower lag over %d updates, COMMIT returned -> key gone (client-observed, polled every ~50us): "
                "p50 %.0f us, p99 %.0f us, max %.0f us; follower-internal (first event received -> DEL landed): "
                "p50 %.0f us, p99 %.0f us\n",
                updates, at(0.5), at(0.99), lag_us.back(), m.lag_p50_us, m.lag_p99_us);
}

}  // namespace
}  // namespace lockstep::test
