// The history checkers of lockstep::testing on hand-made histories: each anomaly they must find,
// the histories they must accept, and the minimal history they print.
#include <gtest/gtest.h>

#include "lockstep/servers/hold_history.h"
#include "lockstep/servers/register_history.h"

namespace lockstep::test {
namespace {

HoldRecord hold(std::string holder, std::int64_t token, std::int64_t from_ms, std::int64_t to_ms) {
    return {"job", std::move(holder), token, from_ms * 1000, to_ms * 1000};
}

TEST(HoldHistoryTest, HoldsOneAfterAnotherWithGrowingTokensAreAllowed) {
    EXPECT_TRUE(check_holds({hold("a", 1, 0, 10), hold("b", 2, 10, 20), hold("a", 5, 25, 30)}).empty());
}

TEST(HoldHistoryTest, AnAcquisitionWhileAnotherHolderStillBelievedIsTwoBelievers) {
    const auto anomalies = check_holds({hold("a", 1, 0, 100), hold("b", 2, 50, 60), hold("c", 3, 120, 130)});
    ASSERT_EQ(anomalies.size(), 1u);
    EXPECT_EQ(anomalies[0].kind, HoldAnomaly::Kind::TwoBelievers);
    EXPECT_EQ(anomalies[0].first.holder, "a");
    EXPECT_EQ(anomalies[0].second.holder, "b");
    const std::string text = anomalies[0].describe();
    EXPECT_NE(text.find("50 ms of overlap"), std::string::npos) << text;
    EXPECT_NE(text.find("b held 'job' with token 2, believed from +50 ms to +60 ms"), std::string::npos) << text;
}

TEST(HoldHistoryTest, ALaterHoldWithASmallerTokenIsReported) {
    const auto anomalies = check_holds({hold("a", 7, 0, 10), hold("b", 3, 20, 30)});
    ASSERT_EQ(anomalies.size(), 1u);
    EXPECT_EQ(anomalies[0].kind, HoldAnomaly::Kind::TokenNotIncreasing);
}

TEST(HoldHistoryTest, NamesAreCheckedApart) {
    HoldRecord other = hold("b", 1, 5, 50);
    other.name = "other";
    EXPECT_TRUE(check_holds({hold("a", 1, 0, 100), other}).empty());
}

TEST(HoldHistoryTest, ARecordTravelsAsOneLine) {
    const HoldRecord r = hold("p12/t3", 42, 5, 9);
    const auto back = HoldRecord::from_line(r.to_line());
    ASSERT_TRUE(back);
    EXPECT_EQ(back->holder, "p12/t3");
    EXPECT_EQ(back->token, 42);
    EXPECT_EQ(back->believed_until_us, 9000);
    EXPECT_FALSE(HoldRecord::from_line("hold job a not-a-number 1 2"));
}

RegisterOp write(int client, std::int64_t v, std::int64_t from_ms, std::optional<std::int64_t> to_ms) {
    return {client, RegisterOp::Kind::Write, v, from_ms * 1000,
            to_ms ? std::optional<std::int64_t>(*to_ms * 1000) : std::nullopt};
}
RegisterOp read(int client, std::int64_t v, std::int64_t from_ms, std::int64_t to_ms) {
    return {client, RegisterOp::Kind::Read, v, from_ms * 1000, to_ms * 1000};
}

TEST(RegisterHistoryTest, ASequentialHistoryIsLinearizable) {
    const auto r = check_register({write(1, 1, 0, 1), read(2, 1, 2, 3), write(1, 2, 4, 5), read(2, 2, 6, 7)}, 0);
    EXPECT_TRUE(r.linearizable);
    EXPECT_FALSE(r.gave_up);
}

TEST(RegisterHistoryTest, AReadOverlappingAWriteMaySeeEitherValue) {
    EXPECT_TRUE(check_register({write(1, 1, 0, 10), read(2, 0, 2, 3)}, 0).linearizable);
    EXPECT_TRUE(check_register({write(1, 1, 0, 10), read(2, 1, 2, 3)}, 0).linearizable);
}

TEST(RegisterHistoryTest, AStaleReadAfterTheWriteReturnedIsNotAndItsMinimalHistoryIsPrinted) {
    // Many harmless operations around one stale read: the minimal history keeps only what
    // shows it (the write that returned, and the read after it that saw the old value).
    std::vector<RegisterOp> ops;
    for (int i = 0; i < 6; ++i) ops.push_back(read(3, 0, i, i + 1));
    ops.push_back(write(1, 1, 10, 11));
    ops.push_back(read(2, 1, 12, 13));
    ops.push_back(read(2, 0, 14, 15));  // stale: the write of 1 returned at 11
    ops.push_back(write(1, 2, 16, 17));
    ops.push_back(read(3, 2, 18, 19));
    const auto r = check_register(ops, 0);
    EXPECT_FALSE(r.linearizable);
    ASSERT_EQ(r.minimal.size(), 2u) << r.explanation;
    EXPECT_EQ(r.minimal[0].kind, RegisterOp::Kind::Write);
    EXPECT_EQ(r.minimal[1].value, 0);
    EXPECT_NE(r.explanation.find("read -> 0"), std::string::npos) << r.explanation;
}

TEST(RegisterHistoryTest, AWriteThatNeverReturnedMayOrMayNotHaveTakenEffect) {
    EXPECT_TRUE(check_register({write(1, 5, 0, std::nullopt), read(2, 5, 10, 11)}, 0).linearizable);
    EXPECT_TRUE(check_register({write(1, 5, 0, std::nullopt), read(2, 0, 10, 11)}, 0).linearizable);
    // But once seen, it cannot be unseen.
    EXPECT_FALSE(check_register({write(1, 5, 0, std::nullopt), read(2, 5, 10, 11), read(2, 0, 12, 13)}, 0).linearizable);
}

TEST(RegisterHistoryTest, TwoReadersDisagreeingOnTheOrderOfTwoWritesIsNot) {
    const auto r = check_register({write(1, 1, 0, 100), write(2, 2, 0, 100), read(3, 1, 10, 20), read(3, 2, 30, 40),
                                   read(4, 2, 10, 20), read(4, 1, 30, 40)},
                                  0);
    EXPECT_FALSE(r.linearizable) << "reader 3 saw 1 then 2, reader 4 saw 2 then 1";
}

TEST(RegisterHistoryTest, ASearchPastItsBoundGivesUpInsteadOfHanging) {
    std::vector<RegisterOp> ops;
    for (int i = 0; i < 40; ++i) ops.push_back(write(i, i, 0, 1000));
    ops.push_back(read(99, 7, 2000, 2001));
    const auto r = check_register(ops, 0, 1000);
    EXPECT_TRUE(r.gave_up);
}

}  // namespace
}  // namespace lockstep::test
