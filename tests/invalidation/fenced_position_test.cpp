// The follower's position store fenced by a leader epoch (--ha): a write under an epoch older
// than the row's is refused and changes nothing, a new term's claim fences out the previous
// term before its successor has saved anything, and a follower whose position write is refused
// stops following at once (a deposed leader neither moves the position nor keeps deleting).
#include <gtest/gtest.h>

#include "invalidation_test_support.h"
#include "lockstep/core/error.h"
#include "lockstep/invalidation/position_store.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

std::string fresh_follower() { return "fenced-" + fresh_prefix(); }

TEST(FencedPositionTest, AnOlderEpochsPositionWriteIsRefusedAndLeavesTheNewerOnesPosition) {
    PositionStore store(servers().mysql_options());
    const std::string name = fresh_follower();
    store.save(name, "0-1-5", 7);
    EXPECT_THROW(store.save(name, "0-1-9", 6), ConflictError);
    EXPECT_EQ(store.load(name), "0-1-5");
    EXPECT_EQ(store.epoch(name), 7);
    store.save(name, "0-1-6", 7);  // the same term saves as often as it likes
    store.save(name, "0-1-8", 8);  // a newer term too
    EXPECT_EQ(store.load(name), "0-1-8");
    EXPECT_EQ(store.epoch(name), 8);
    EXPECT_THROW(store.save(name, "0-1-99", 7), ConflictError);
    EXPECT_EQ(store.load(name), "0-1-8");
    store.erase(name);
}

TEST(FencedPositionTest, ANewTermsClaimRefusesThePreviousTermsNextWriteBeforeTheNewOneSaved) {
    PositionStore store(servers().mysql_options());
    const std::string name = fresh_follower();
    store.save(name, "0-1-10", 3);
    store.claim(name, 4);
    EXPECT_EQ(store.load(name), "0-1-10") << "a claim must not move the position";
    EXPECT_THROW(store.save(name, "0-1-12", 3), ConflictError);
    EXPECT_EQ(store.load(name), "0-1-10");
    EXPECT_THROW(store.claim(name, 3), ConflictError);
    store.erase(name);
}

TEST(FencedPositionTest, AnUnfencedWriteKeepsTheRowsEpoch) {
    PositionStore store(servers().mysql_options());
    const std::string name = fresh_follower();
    store.save(name, "0-1-1");
    EXPECT_EQ(store.epoch(name), 0);
    store.save(name, "0-1-2", 5);
    store.save(name, "0-1-3");
    EXPECT_EQ(store.load(name), "0-1-3");
    EXPECT_EQ(store.epoch(name), 5);
    store.erase(name);
}

TEST(FencedPositionTest, AFollowerWhosePositionANewerEpochClaimedStopsFollowingAtOnce) {
    const std::string prefix = fresh_prefix();
    const std::string name = fresh_follower();
    auto o = follower_options(name);
    o.fence_token = 5;
    o.second_delete_delay = 0ms;
    BinlogInvalidator f(servers().mysql_options(), redis(), products_map(prefix), o);
    f.start();
    const std::int64_t id = fresh_id();
    const std::string key = prefix + "{product:" + std::to_string(id) + "}";
    db().execute("INSERT INTO products (id, name, price, stock, version) VALUES (?, 'f', 1, 1, 1)", {id});
    ASSERT_TRUE(f.wait_caught_up(20s));
    PositionStore store(servers().mysql_options());
    ASSERT_TRUE(eventually([&] { return store.load(name) == f.metrics().applied_gtid; }, 20s));
    EXPECT_EQ(store.epoch(name), 5);
    const std::string saved = *store.load(name);

    store.claim(name, 6);  // a successor's term begins while this one still runs
    redis().set(key, "cached", 60s);
    db().execute("UPDATE products SET price = 2 WHERE id = ?", {id});
    // Its next position write (after this UPDATE's DEL) is refused; it stops.
    ASSERT_TRUE(eventually([&] { return f.metrics().fenced_out; }, 20s));
    ASSERT_TRUE(eventually([&] { return !f.metrics().connected; }, 20s));
    const InvalidatorMetrics m = f.metrics();
    EXPECT_GE(m.positions_refused, 1u);
    EXPECT_EQ(store.load(name), saved) << "a deposed follower moved the position";
    EXPECT_EQ(store.epoch(name), 6);

    // Stopped: a later change is left to the new leader.
    redis().set(key, "cached", 60s);
    db().execute("UPDATE products SET price = 3 WHERE id = ?", {id});
    const auto events = m.events;
    EXPECT_EQ(f.metrics().events, events);
    f.stop();
    EXPECT_EQ(store.load(name), saved) << "the stop's final save went through the fence";
    redis().command({"DEL", key});
    db().execute("DELETE FROM products WHERE id = ?", {id});
    store.erase(name);
}

TEST(FencedPositionTest, AFollowerStartedUnderAnOlderEpochThanTheStoredOneNeverFollows) {
    const std::string prefix = fresh_prefix();
    const std::string name = fresh_follower();
    PositionStore store(servers().mysql_options());
    store.save(name, "0-1-1", 9);
    auto o = follower_options(name);
    o.fence_token = 8;
    BinlogInvalidator f(servers().mysql_options(), redis(), products_map(prefix), o);
    f.start();
    ASSERT_TRUE(eventually([&] { return f.metrics().fenced_out; }, 20s));
    f.stop();
    const InvalidatorMetrics m = f.metrics();
    EXPECT_EQ(m.events, 0u);
    EXPECT_EQ(m.positions_refused, 1u);
    EXPECT_EQ(store.load(name), "0-1-1");
    EXPECT_EQ(store.epoch(name), 9);
    store.erase(name);
}

}  // namespace
}  // namespace lockstep::test
