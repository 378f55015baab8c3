// The lock layer's errors: each says what the caller should do next, and each is caught as a
// lockstep::Error by callers that do not name it.
#include "lockstep/locks/lock_errors.h"

#include <gtest/gtest.h>

namespace lockstep {
namespace {

TEST(LockErrors, EachTypeGivesItsRecovery) {
    EXPECT_EQ(NotOwnerError("x").recovery(), Recovery::GiveUp);
    EXPECT_EQ(LockLostError("x").recovery(), Recovery::RetryTransaction);
    EXPECT_EQ(LockUpgradeError("x").recovery(), Recovery::GiveUp);
    EXPECT_EQ(LockClientClosedError("x").recovery(), Recovery::GiveUp);
    EXPECT_EQ(ReplicationWaitError("x").recovery(), Recovery::RetryCall);
}

TEST(LockErrors, TheAdviceSurvivesCatchingTheRoot) {
    auto advice = [](const Error& e) { return e.recovery(); };
    EXPECT_EQ(advice(LockLostError("x")), Recovery::RetryTransaction);
    EXPECT_EQ(recovery_of(NotOwnerError("n")), Recovery::GiveUp);
    EXPECT_THROW(throw NotOwnerError("n"), Error);
}

}  // namespace
}  // namespace lockstep
