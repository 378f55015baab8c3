// Transaction against the real MariaDB: commit persists, scope exit rolls back, and the two
// errors that ask for a retry of the whole transaction are forced deterministically.
#include <chrono>
#include <optional>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "db_test_support.h"
#include "lockstep/core/fault_point.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class TransactionTest : public DbTest {};

TEST_F(TransactionTest, CommitPersists) {
    const std::int64_t id = make_product(10);
    {
        Transaction tx(pool());
        EXPECT_EQ(tx.execute("UPDATE products SET stock = stock - 3 WHERE id = ?", {id}), 1u);
        tx.commit();
        EXPECT_FALSE(tx.active());
    }
    EXPECT_EQ(stock_of(id), 7);
}

TEST_F(TransactionTest, ExceptionInScopeRollsBack) {
    const std::int64_t id = make_product(10);
    try {
        Transaction tx(pool());
        tx.execute("UPDATE products SET stock = 0, version = version + 1 WHERE id = ?", {id});
        // Visible inside the transaction...
        EXPECT_EQ(tx.query_one("SELECT stock FROM products WHERE id = ?", {id})->get<int>("stock"), 0);
        throw std::runtime_error("business rule failed");
    } catch (const std::runtime_error&) {
    }
    // ...and gone after it.
    EXPECT_EQ(stock_of(id), 10);
    EXPECT_EQ(
        pool().query_one("SELECT version FROM products WHERE id = ?", {id})->get<std::int64_t>("version"), 0);
}

TEST_F(TransactionTest, ScopeExitWithoutCommitRollsBack) {
    const std::int64_t id = make_product(10);
    {
        Transaction tx(pool());
        tx.execute("UPDATE products SET stock = 1 WHERE id = ?", {id});
    }
    EXPECT_EQ(stock_of(id), 10);
}

TEST_F(TransactionTest, ExplicitRollbackEndsTheTransaction) {
    const std::int64_t id = make_product(10);
    Transaction tx(pool());
    tx.execute("UPDATE products SET stock = 2 WHERE id = ?", {id});
    tx.rollback();
    EXPECT_FALSE(tx.active());
    EXPECT_THROW(tx.execute("UPDATE products SET stock = 3 WHERE id = ?", {id}), ConfigError);
    EXPECT_THROW(tx.commit(), ConfigError);
    EXPECT_EQ(stock_of(id), 10);
}

TEST_F(TransactionTest, ASecondTransactionOnTheSameConnectionIsRefused) {
    const std::int64_t id = make_product(10);
    PooledMysqlConnection conn = pool().acquire();
    Transaction outer(*conn);
    outer.execute("UPDATE products SET stock = 4 WHERE id = ?", {id});
    // START TRANSACTION would silently commit `outer`.
    EXPECT_THROW(Transaction inner(*conn), ConfigError);
    EXPECT_TRUE(outer.active());
    outer.rollback();
    EXPECT_EQ(stock_of(id), 10);
}

TEST_F(TransactionTest, FailureBeforeCommitRollsBack) {
    const std::int64_t id = make_product(10);
    auto armed = fault::arm("db.before_commit", fault::fail<ConnectionError>("injected before COMMIT"));
    try {
        Transaction tx(pool());
        tx.execute("UPDATE products SET stock = 0 WHERE id = ?", {id});
        tx.commit();
        FAIL() << "commit ignored the injected failure";
    } catch (const ConnectionError&) {
    }
    armed.disarm();
    EXPECT_EQ(stock_of(id), 10);
}

TEST_F(TransactionTest, ReadCommittedSeesAnotherTransactionsCommit) {
    const std::int64_t id = make_product(10);
    Transaction reader(pool(), {.isolation = IsolationLevel::ReadCommitted});
    EXPECT_EQ(reader.query_one("SELECT stock FROM products WHERE id = ?", {id})->get<int>("stock"), 10);
    pool().execute("UPDATE products SET stock = 9 WHERE id = ?", {id});
    EXPECT_EQ(reader.query_one("SELECT stock FROM products WHERE id = ?", {id})->get<int>("stock"), 9);
    reader.commit();
}

TEST_F(TransactionTest, ReadOnlyTransactionRefusesWrites) {
    const std::int64_t id = make_product(10);
    Transaction tx(pool(), {.isolation = std::nullopt, .read_only = true});
    try {
        tx.execute("UPDATE products SET stock = 1 WHERE id = ?", {id});
        FAIL() << "a read-only transaction wrote";
    } catch (const DbError& e) {
        EXPECT_EQ(e.code(), 1792);  // ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
    }
}

// Two transactions each lock one row, meet at a barrier, then each asks for the other's row:
// a lock cycle every run. InnoDB picks one victim (1213) and lets the other finish.
TEST_F(TransactionTest, ForcedDeadlockIsRetryTransactionWithCode1213) {
    const std::int64_t first = make_product(10);
    const std::int64_t second = make_product(10);
    MysqlOptions o = db_options();
    o.pool_size = 2;
    MysqlPool pool(o);
    fault::Barrier both_hold_one_row(2, 20s);

    auto transfer = [&](std::int64_t from, std::int64_t to) -> std::optional<DbError> {
        PooledMysqlConnection conn = pool.acquire();
        // A bound in case deadlock detection is off on an external server: then this is 1205.
        conn->execute_unprepared("SET SESSION innodb_lock_wait_timeout = 10");
        conn->discard();  // session state changed: do not lend it again
        try {
            Transaction tx(*conn);
            tx.execute("UPDATE products SET stock = stock - 1 WHERE id = ?", {from});
            both_hold_one_row.arrive_and_wait();
            tx.execute("UPDATE products SET stock = stock + 1 WHERE id = ?", {to});
            tx.commit();
            return std::nullopt;
        } catch (const DbError& e) {
            return e;
        }
    };
    std::optional<DbError> a_error, b_error;
    auto run = [&](std::optional<DbError>& error, std::int64_t from, std::int64_t to) {
        try {
            error = transfer(from, to);
        } catch (const std::exception& e) {
            ADD_FAILURE() << "unexpected: " << e.what();
        }
    };
    std::thread a([&] { run(a_error, first, second); });
    std::thread b([&] { run(b_error, second, first); });
    a.join();
    b.join();

    ASSERT_NE(a_error.has_value(), b_error.has_value()) << "exactly one transaction must be the victim";
    const DbError& victim = a_error ? *a_error : *b_error;
    EXPECT_EQ(victim.code(), 1213) << victim.what();
    EXPECT_EQ(victim.sql_state(), "40001");
    EXPECT_EQ(victim.recovery(), Recovery::RetryTransaction);
    // The survivor's transfer committed; the victim's was rolled back entirely.
    const int moved_to_second = a_error ? -1 : 1;
    EXPECT_EQ(stock_of(first), 10 - moved_to_second);
    EXPECT_EQ(stock_of(second), 10 + moved_to_second);
}

TEST_F(TransactionTest, LockWaitTimeoutIsRetryTransactionWithCode1205) {
    const std::int64_t id = make_product(10);
    MysqlOptions o = db_options();
    o.pool_size = 2;
    MysqlPool pool(o);
    PooledMysqlConnection holder_conn = pool.acquire();
    PooledMysqlConnection waiter_conn = pool.acquire();
    waiter_conn->execute_unprepared("SET SESSION innodb_lock_wait_timeout = 1");
    waiter_conn->discard();

    Transaction holder(*holder_conn);
    holder.execute("UPDATE products SET stock = stock - 1 WHERE id = ?", {id});

    Transaction waiter(*waiter_conn);
    const auto start = Clock::now();
    try {
        waiter.execute("UPDATE products SET stock = stock - 2 WHERE id = ?", {id});
        FAIL() << "updated a row another transaction holds";
    } catch (const DbError& e) {
        EXPECT_EQ(e.code(), 1205) << e.what();
        EXPECT_EQ(e.recovery(), Recovery::RetryTransaction);
    }
    const auto waited = Clock::now() - start;
    EXPECT_GE(waited, 900ms);
    EXPECT_LT(waited, 5s);

    waiter.rollback();
    holder.commit();
    EXPECT_EQ(stock_of(id), 9);
}

TEST_F(TransactionTest, AConnectionLostInsideATransactionIsATypedErrorAndNothingCommits) {
    LOCKSTEP_REQUIRE_OWNED_MYSQL();
    const std::int64_t id = make_product(10);
    MysqlOptions o = db_options();
    o.validation_interval = std::chrono::hours(1);
    MysqlPool pool(o);
    {
        Transaction tx(pool);
        tx.execute("UPDATE products SET stock = 0 WHERE id = ?", {id});
        servers().restart_mysql();
        try {
            tx.commit();
            FAIL() << "COMMIT on a dead connection reported success";
        } catch (const DbError& e) {
            EXPECT_EQ(e.recovery(), Recovery::RetryCall) << e.what();
        }
        EXPECT_TRUE(tx.connection().broken());
    }  // the destructor does not throw
    EXPECT_EQ(stock_of(id), 10);
    EXPECT_EQ(pool.query_one("SELECT 1 AS x")->get<int>("x"), 1);
}

}  // namespace
}  // namespace lockstep::test
