// The statement helpers against the real MariaDB: parameters (NULL, binary), typed getters and
// their errors, and how server errors keep their code and SQLState.
#include <string>

#include <gtest/gtest.h>

#include "db_test_support.h"

namespace lockstep::test {
namespace {

using namespace std::string_literals;

class StatementTest : public DbTest {};

TEST_F(StatementTest, NullAndBinaryParametersRoundTrip) {
    const std::string bytes = "a\0b\xff\x00z\n'\"\\"s;
    ASSERT_EQ(bytes.size(), 10u);
    std::optional<Row> row =
        pool().query_one("SELECT ? AS v, ? AS n, CAST(? AS SIGNED) AS ni", {bytes, nullptr, sql_null});
    ASSERT_TRUE(row);
    EXPECT_EQ(row->get<std::string>("v"), bytes);
    EXPECT_TRUE(row->is_null("n"));
    EXPECT_TRUE(row->is_null("ni"));
    EXPECT_EQ(row->get<std::optional<std::int64_t>>("ni"), std::nullopt);

    // Stored in and read back from a real VARBINARY column.
    PooledMysqlConnection conn = pool().acquire();
    EXPECT_EQ(conn->execute("INSERT INTO outbox (cache_key) VALUES (?)", {bytes}), 1u);
    const std::int64_t id = conn->last_insert_id();
    forget_outbox_row_later(id);
    EXPECT_EQ(
        conn->query_one("SELECT cache_key FROM outbox WHERE id = ?", {id})->get<std::string>("cache_key"),
        bytes);
}

TEST_F(StatementTest, TypedGettersReadEachColumnType) {
    const std::int64_t id = make_product(7, 123456789012LL);
    std::optional<Row> row = pool().query_one(
        "SELECT id, name, price, stock, version, 2.5e0 AS d, 12.50 AS dec_value, "
        "CAST('2026-11-20 10:00:00' AS DATETIME) AS at FROM products WHERE id = ?",
        {id});
    ASSERT_TRUE(row);
    EXPECT_EQ(row->get<std::int64_t>("id"), id);
    EXPECT_EQ(row->get<std::string>("name"), "product " + std::to_string(id));
    EXPECT_EQ(row->get<std::int64_t>("price"), 123456789012LL);
    EXPECT_EQ(row->get<int>("stock"), 7);
    EXPECT_EQ(row->get<int>("STOCK"), 7);  // column names match case-insensitively, as in MySQL
    EXPECT_EQ(row->get<std::int64_t>("version"), 0);
    EXPECT_DOUBLE_EQ(row->get<double>("d"), 2.5);
    EXPECT_EQ(row->get<std::string>("dec_value"), "12.50");  // DECIMAL stays exact
    EXPECT_EQ(row->get<std::string>("at"), "2026-11-20 10:00:00");
    EXPECT_EQ(row->size(), 8u);
}

TEST_F(StatementTest, WrongTypeGetterIsAClearError) {
    std::optional<Row> row = pool().query_one("SELECT 'abc' AS s, 42 AS n, NULL AS z");
    ASSERT_TRUE(row);
    try {
        row->get<std::int64_t>("s");
        FAIL() << "read a string as int64";
    } catch (const ProtocolError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("'s'"), std::string::npos) << what;
        EXPECT_NE(what.find("not int64"), std::string::npos) << what;
    }
    EXPECT_THROW(row->get<std::string>("n"), ProtocolError);
    EXPECT_THROW(row->get<double>("n"), ProtocolError);
    try {
        row->get<std::int64_t>("z");
        FAIL() << "read NULL as int64";
    } catch (const ProtocolError& e) {
        EXPECT_NE(std::string(e.what()).find("std::optional"), std::string::npos) << e.what();
    }
}

TEST_F(StatementTest, MissingColumnIsAClearErrorListingTheColumns) {
    std::optional<Row> row = pool().query_one("SELECT 1 AS one, 2 AS two");
    ASSERT_TRUE(row);
    try {
        row->get<std::int64_t>("three");
        FAIL() << "read a missing column";
    } catch (const ProtocolError& e) {
        EXPECT_NE(std::string(e.what()).find("no column 'three' (columns: one, two)"), std::string::npos)
            << e.what();
    }
    EXPECT_FALSE(row->has_column("three"));
}

TEST_F(StatementTest, IntGetterRefusesAValueThatDoesNotFit) {
    std::optional<Row> row = pool().query_one("SELECT 9000000000 AS big");
    EXPECT_THROW(row->get<int>("big"), ProtocolError);
    EXPECT_EQ(row->get<std::int64_t>("big"), 9000000000LL);
}

TEST_F(StatementTest, UnsignedParameterAboveInt64IsRefused) {
    EXPECT_THROW(SqlValue(std::uint64_t{1} << 63), ConfigError);
    EXPECT_EQ(SqlValue(std::uint64_t{7}).as_int64(), 7);
}

TEST_F(StatementTest, QueryOneIsEmptyForNoRowAndRefusesSeveral) {
    const std::int64_t id = make_product();
    EXPECT_EQ(pool().query_one("SELECT id FROM products WHERE id = ?", {-id}), std::nullopt);
    EXPECT_THROW(pool().query_one("SELECT 1 AS x UNION ALL SELECT 2"), ProtocolError);
    EXPECT_EQ(pool().query("SELECT 1 AS x UNION ALL SELECT 2").size(), 2u);
}

TEST_F(StatementTest, ExecuteReturnsRowsMatchedEvenWhenNothingChanged) {
    const std::int64_t id = make_product(5);
    EXPECT_EQ(pool().execute("UPDATE products SET stock = 5 WHERE id = ?", {id}), 1u);  // matched, unchanged
    EXPECT_EQ(pool().execute("UPDATE products SET stock = 4 WHERE id = ? AND stock >= 5", {id}), 1u);
    EXPECT_EQ(pool().execute("UPDATE products SET stock = 3 WHERE id = ? AND stock >= 5", {id}), 0u);
    EXPECT_EQ(stock_of(id), 4);
}

TEST_F(StatementTest, ParameterCountMismatchIsAClearError) {
    EXPECT_THROW(pool().query("SELECT ? AS a, ? AS b", {1}), ConfigError);
    EXPECT_THROW(pool().query("SELECT ? AS a", {1, 2}), ConfigError);
    // The connection stays usable after a refused call.
    EXPECT_EQ(pool().query_one("SELECT ? AS a", {1})->get<int>("a"), 1);
}

TEST_F(StatementTest, ExecuteAndQueryRefuseTheWrongKindOfStatement) {
    EXPECT_THROW(pool().execute("SELECT 1"), ConfigError);
    const std::int64_t id = make_product();
    EXPECT_THROW(pool().query("UPDATE products SET stock = 1 WHERE id = ?", {id}), ConfigError);
    EXPECT_EQ(stock_of(id), 10);  // refused before it ran
}

TEST_F(StatementTest, SyntaxErrorKeepsCodeAndSqlStateAndSaysGiveUp) {
    try {
        pool().query("SELEC 1");
        FAIL() << "accepted bad SQL";
    } catch (const DbError& e) {
        EXPECT_EQ(e.code(), 1064);
        EXPECT_EQ(e.sql_state(), "42000");
        EXPECT_EQ(e.recovery(), Recovery::GiveUp);
        EXPECT_NE(std::string(e.what()).find("SELEC 1"), std::string::npos) << e.what();
    }
}

TEST_F(StatementTest, DuplicateKeyIsADbErrorAndTheConnectionStaysInThePool) {
    const std::int64_t id = make_product();
    MysqlOptions o = db_options();
    o.pool_size = 1;
    MysqlPool one(o);
    try {
        one.execute("INSERT INTO products (id, name, price, stock) VALUES (?, 'dup', 1, 1)", {id});
        FAIL() << "inserted a duplicate key";
    } catch (const DbError& e) {
        EXPECT_EQ(e.code(), 1062);
        EXPECT_EQ(e.sql_state(), "23000");
        EXPECT_EQ(e.recovery(), Recovery::GiveUp);
    }
    EXPECT_EQ(one.query_one("SELECT 1 AS x")->get<int>("x"), 1);
    EXPECT_EQ(one.stats().created, 1u);
    EXPECT_EQ(one.stats().discarded, 0u);
}

TEST_F(StatementTest, RepeatedStatementsReuseTheirPreparedStatement) {
    PooledMysqlConnection conn = pool().acquire();
    auto prepared_count = [&] {
        return conn->query_one("SHOW SESSION STATUS LIKE 'Com_stmt_prepare'")->get<std::string>("Value");
    };
    conn->query_one("SELECT ? AS x", {1});
    const std::string before = prepared_count();
    for (int i = 0; i < 5; ++i) EXPECT_EQ(conn->query_one("SELECT ? AS x", {i})->get<int>("x"), i);
    EXPECT_EQ(prepared_count(), before);  // no PREPARE since: the SHOW statement is cached too
}

TEST_F(StatementTest, AnUnpreparedStatementThatReturnsRowsLeavesTheSessionInSync) {
    PooledMysqlConnection conn = pool().acquire();
    conn->execute_unprepared("SELECT 1");
    EXPECT_EQ(conn->query_one("SELECT 2 AS x")->get<int>("x"), 2);
}

}  // namespace
}  // namespace lockstep::test
