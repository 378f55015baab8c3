// FreshnessHistory's checker on hand-made histories: fresh reads pass, a stale read beyond the
// bound is an anomaly with its evidence, within the bound it is counted, overlapping operations
// are never compared, a failed write counts once a read saw it, keys are judged apart; and
// recording from many threads costs little.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <thread>
#include <vector>

#include "lockstep/servers/freshness_history.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;
using Kind = FreshnessOp::Kind;
using Outcome = FreshnessOp::Outcome;

FreshnessOp op(Kind kind, std::int64_t version, std::int64_t from_ms, std::int64_t to_ms, std::string key = "k",
               Outcome outcome = Outcome::Ok) {
    return {0, kind == Kind::Write ? 1 : 2, std::move(key), kind, version, from_ms * 1000, to_ms * 1000, outcome};
}
FreshnessOp write(std::int64_t v, std::int64_t from_ms, std::int64_t to_ms, std::string key = "k") {
    return op(Kind::Write, v, from_ms, to_ms, std::move(key));
}
FreshnessOp read(std::int64_t v, std::int64_t from_ms, std::int64_t to_ms, std::string key = "k") {
    return op(Kind::Read, v, from_ms, to_ms, std::move(key));
}

TEST(FreshnessHistoryTest, ReadsThatSeeEveryCompletedWritePass) {
    const auto c = check_freshness({read(1, 0, 1), write(2, 2, 4), read(2, 5, 6), write(3, 7, 9), read(3, 10, 11)}, 0us,
                                   "WriteThrough+None");
    EXPECT_TRUE(c.ok()) << c.describe();
    EXPECT_EQ(c.reads, 3u);
    EXPECT_EQ(c.writes, 2u);
    EXPECT_EQ(c.stale_within_bound, 0u);
    EXPECT_EQ(c.summary(), "WriteThrough+None: 3 reads, 0 stale within 0.0 ms, 0 anomalies");
}

TEST(FreshnessHistoryTest, AStaleReadBeyondTheBoundIsAnAnomalyWithTheWriteAndTheReadAsEvidence) {
    const auto c = check_freshness({write(2, 0, 10), write(3, 20, 30), read(1, 130, 131)}, 50ms);
    ASSERT_EQ(c.anomalies.size(), 1u) << c.describe();
    const auto& a = c.anomalies[0];
    // Measured from the first write that made the read stale, the longest it was superseded.
    EXPECT_EQ(a.write.version, 2);
    EXPECT_EQ(a.read.version, 1);
    EXPECT_EQ(a.late_us, 120'000);
    EXPECT_EQ(c.max_late_us, 120'000);
    const std::string text = a.describe();
    EXPECT_NE(text.find("invoked +120.0 ms after a newer write had completed returned v1 < v2"), std::string::npos)
        << text;
    EXPECT_NE(text.find("write of 'k' by 0/1: wrote v2, invoked +0.0 ms, completed +10.0 ms"), std::string::npos)
        << text;
    EXPECT_NE(text.find("read  of 'k' by 0/2: returned v1, invoked +130.0 ms, completed +131.0 ms"), std::string::npos)
        << text;
    std::cout << c.describe();
}

TEST(FreshnessHistoryTest, AStaleReadWithinTheBoundIsCountedNotReported) {
    const auto c = check_freshness({write(2, 0, 10), read(1, 40, 41), read(1, 200, 201), read(2, 300, 301)}, 100ms);
    EXPECT_EQ(c.stale_within_bound, 1u);
    ASSERT_EQ(c.anomalies.size(), 1u);
    EXPECT_EQ(c.anomalies[0].late_us, 190'000);
    EXPECT_EQ(c.reads, 3u);
}

TEST(FreshnessHistoryTest, AReadOverlappingTheWriteMayReturnTheOldVersion) {
    // The read began before the write completed (either order is allowed), even by 1 µs.
    FreshnessOp r = read(1, 0, 0);
    r.invoke_us = 9'999;
    r.complete_us = 20'000;
    const auto c = check_freshness({write(2, 0, 10), read(1, 5, 15), r}, 0us);
    EXPECT_TRUE(c.ok()) << c.describe();
    EXPECT_EQ(c.stale_within_bound, 0u);
}

TEST(FreshnessHistoryTest, AFailedWriteCountsOnlyOnceAReadSawItsVersion) {
    const FreshnessOp unseen = op(Kind::Write, 5, 0, 10, "a", Outcome::Failed);
    EXPECT_TRUE(check_freshness({unseen, read(1, 50, 51, "a")}, 0us).ok()) << "never seen: maybe never written";

    // Seen at +40..+45: from +45 on every read must return at least v5.
    const FreshnessOp seen = op(Kind::Write, 5, 0, 10, "b", Outcome::Unknown);
    const auto c = check_freshness({seen, read(1, 20, 21, "b"), read(5, 40, 45, "b"), read(1, 44, 60, "b"),
                                    read(1, 50, 51, "b")},
                                   0us);
    ASSERT_EQ(c.anomalies.size(), 1u) << c.describe();
    EXPECT_EQ(c.anomalies[0].read.invoke_us, 50'000);
    EXPECT_EQ(c.anomalies[0].late_us, 5'000);
    EXPECT_EQ(c.writes, 1u);
    EXPECT_NE(c.anomalies[0].describe().find("(unknown)"), std::string::npos);

    // A failed read is not judged.
    FreshnessOp failed = read(0, 100, 101, "b");
    failed.outcome = Outcome::Failed;
    EXPECT_EQ(check_freshness({seen, read(5, 40, 45, "b"), failed}, 0us).reads, 1u);
}

TEST(FreshnessHistoryTest, KeysAreJudgedApart) {
    const auto c = check_freshness({write(9, 0, 10, "a"), read(1, 50, 51, "b"), write(2, 0, 10, "b"),
                                    read(9, 50, 51, "a"), read(1, 60, 61, "b")},
                                   0us);
    ASSERT_EQ(c.anomalies.size(), 2u) << c.describe();
    EXPECT_EQ(c.anomalies[0].read.key, "b");
    EXPECT_EQ(c.anomalies[1].read.key, "b");
    EXPECT_EQ(c.anomalies[0].write.version, 2);
}

TEST(FreshnessHistoryTest, OperationsTravelBetweenProcessesAsLines) {
    FreshnessOp o = op(Kind::Write, 1234567890123, 7, 9, "ls:{product:42}", Outcome::Unknown);
    o.process = 4711;
    o.thread = 3;
    EXPECT_EQ(o.to_line(), "fresh 4711 3 ls:{product:42} write 1234567890123 7000 9000 unknown");
    const auto back = FreshnessOp::from_line(o.to_line());
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->to_line(), o.to_line());
    EXPECT_FALSE(FreshnessOp::from_line("fresh 1 2 k erase 1 2 3 ok").has_value());
    EXPECT_FALSE(FreshnessOp::from_line("hold job a 1 2 3").has_value());
    EXPECT_FALSE(FreshnessOp::from_line("fresh 1 2 k read 1 2").has_value());
}

// Recording must not disturb the loop it watches: 8 threads record 100,000 operations each and
// the cost per recorded operation is printed (a few hundred ns at most, next to a cache round
// trip of ~50 µs); nothing is lost.
TEST(FreshnessHistoryTest, ManyThreadsRecordCheaplyAndNothingIsLost) {
    FreshnessHistory history("hot loop", 1);
    constexpr int kThreads = 8, kEach = 100'000;
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            const std::string key = "k" + std::to_string(t % 4);
            for (int i = 0; i < kEach; ++i) {
                const std::int64_t at = monotonic_us();
                if (i % 10 == 0) {
                    history.write_done(t, key, at, i + 1);
                } else {
                    history.read_done(t, key, at, i);
                }
            }
        });
    }
    for (auto& t : threads) t.join();
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    ASSERT_EQ(history.size(), static_cast<std::size_t>(kThreads) * kEach);
    std::cout << "[ measure ] " << ns / kEach << " ns per recorded operation and thread (" << kThreads
              << " threads, wall clock)\n";
    EXPECT_LT(ns / kEach, 20'000.0) << "recording costs as much as a cache round trip";
    const auto check_start = std::chrono::steady_clock::now();
    const auto c = history.check(0us);
    std::cout << "[ measure ] check of " << history.size() << " operations: "
              << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - check_start)
                     .count()
              << " ms; " << c.summary() << "\n";
    EXPECT_EQ(c.reads + c.writes, history.size());
}

}  // namespace
}  // namespace lockstep::test
