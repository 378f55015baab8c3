// Error kinds: every error type says what the caller should do next, and DbError maps MySQL /
// MariaDB error codes and SQLStates onto that advice.
#include "lockstep/core/error.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace lockstep {
namespace {

TEST(ErrorKinds, EachTypeGivesItsRecovery) {
    EXPECT_EQ(Error("x").recovery(), Recovery::GiveUp);
    EXPECT_EQ(ConfigError("port", "x").recovery(), Recovery::GiveUp);
    EXPECT_EQ(ConnectionError("x").recovery(), Recovery::RetryCall);
    EXPECT_EQ(TimeoutError("x").recovery(), Recovery::RetryCall);
    EXPECT_EQ(ProtocolError("x").recovery(), Recovery::GiveUp);
    EXPECT_EQ(ConflictError("x").recovery(), Recovery::RetryTransaction);
    EXPECT_EQ(DbError("deadlock", 1213, "40001").recovery(), Recovery::RetryTransaction);
}

TEST(ErrorKinds, RecoveryIsVirtualThroughTheRoot) {
    // Callers catch `const Error&` and ask it; the advice must survive slicing to the base.
    auto advice = [](const Error& e) { return e.recovery(); };
    EXPECT_EQ(advice(TimeoutError("x")), Recovery::RetryCall);
    EXPECT_EQ(advice(ConflictError("x")), Recovery::RetryTransaction);
    EXPECT_EQ(advice(DbError("gone", 2006, "HY000")), Recovery::RetryCall);
}

TEST(ErrorKinds, HierarchyLetsCallersCatchBroadly) {
    EXPECT_THROW(throw TimeoutError("t"), ConnectionError);
    EXPECT_THROW(throw ProtocolError("p"), Error);
    EXPECT_THROW(throw DbError("d", 1, "HY000"), Error);
    EXPECT_THROW(throw ConfigError("p", "w"), std::runtime_error);
}

TEST(ErrorKinds, ConfigErrorNamesItsPart) {
    ConfigError e("query parameter 'pool_size'", "must be positive");
    EXPECT_EQ(e.part(), "query parameter 'pool_size'");
    EXPECT_STREQ(e.what(), "config error in query parameter 'pool_size': must be positive");
}

TEST(DbErrorRecovery, DeadlockAndLockWaitTimeoutRetryTheTransaction) {
    EXPECT_EQ(DbError::recovery_for(1213, "40001"), Recovery::RetryTransaction);
    EXPECT_EQ(DbError::recovery_for(1205, "HY000"), Recovery::RetryTransaction);
    // The code decides even when the driver reports no SQLState.
    EXPECT_EQ(DbError::recovery_for(1213, ""), Recovery::RetryTransaction);
}

TEST(DbErrorRecovery, LostConnectionsRetryTheCall) {
    EXPECT_EQ(DbError::recovery_for(2006, "HY000"), Recovery::RetryCall);  // server has gone away
    EXPECT_EQ(DbError::recovery_for(2013, "HY000"), Recovery::RetryCall);  // lost during query
    EXPECT_EQ(DbError::recovery_for(2002, ""), Recovery::RetryCall);
    EXPECT_EQ(DbError::recovery_for(2003, ""), Recovery::RetryCall);
    EXPECT_EQ(DbError::recovery_for(2055, ""), Recovery::RetryCall);
}

TEST(DbErrorRecovery, SyntaxErrorGivesUp) {
    EXPECT_EQ(DbError::recovery_for(1064, "42000"), Recovery::GiveUp);
    EXPECT_EQ(DbError("You have an error in your SQL syntax", 1064, "42000").recovery(), Recovery::GiveUp);
}

TEST(DbErrorRecovery, SqlStateClassDecidesForUnknownCodes) {
    EXPECT_EQ(DbError::recovery_for(0, "40001"), Recovery::RetryTransaction);  // serialization failure
    EXPECT_EQ(DbError::recovery_for(9999, "40001"), Recovery::RetryTransaction);
    EXPECT_EQ(DbError::recovery_for(0, "08S01"), Recovery::RetryCall);  // communication link failure
    EXPECT_EQ(DbError::recovery_for(0, "08004"), Recovery::RetryCall);
    EXPECT_EQ(DbError::recovery_for(0, "23000"), Recovery::GiveUp);  // duplicate key
    EXPECT_EQ(DbError::recovery_for(0, "4"), Recovery::GiveUp);      // too short to have a class
    EXPECT_EQ(DbError::recovery_for(0, ""), Recovery::GiveUp);
}

TEST(DbErrorRecovery, KeepsCodeStateAndMessage) {
    DbError e("Deadlock found when trying to get lock", 1213, "40001");
    EXPECT_EQ(e.code(), 1213);
    EXPECT_EQ(e.sql_state(), "40001");
    EXPECT_NE(std::string(e.what()).find("Deadlock found"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("1213"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("40001"), std::string::npos);
}

TEST(RecoveryOf, LockstepErrorsAnswerForThemselves) {
    EXPECT_EQ(recovery_of(TimeoutError("t")), Recovery::RetryCall);
    EXPECT_EQ(recovery_of(ConflictError("c")), Recovery::RetryTransaction);
    EXPECT_EQ(recovery_of(DbError("d", 1205, "HY000")), Recovery::RetryTransaction);
    EXPECT_EQ(recovery_of(ProtocolError("p")), Recovery::GiveUp);
}

TEST(RecoveryOf, ForeignExceptionsGiveUp) {
    EXPECT_EQ(recovery_of(std::runtime_error("boom")), Recovery::GiveUp);
    EXPECT_EQ(recovery_of(std::logic_error("bug")), Recovery::GiveUp);
}

TEST(RecoveryOf, ToStringIsReadable) {
    EXPECT_EQ(to_string(Recovery::RetryCall), "retry the call");
    EXPECT_EQ(to_string(Recovery::RetryTransaction), "retry the transaction");
    EXPECT_EQ(to_string(Recovery::GiveUp), "give up");
}

}  // namespace
}  // namespace lockstep
