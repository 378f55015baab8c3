// Server errors about row values (a duplicate e-mail address, a string that is not a number) keep
// their error code, SQLState and the statement with its placeholders, and never carry the value:
// not in the message, not in what(), not in the log line the db layer writes.
#include <unistd.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include "db_test_support.h"
#include "lockstep/core/logging.h"

namespace lockstep::test {
namespace {

// Parts of each value that must not appear anywhere: the whole value and its distinctive pieces
// (a log line that cut the address at '@' would still leak the mailbox).
const std::vector<std::string> kEmailParts = {"jane.roe@example.com", "jane.roe", "example.com"};
const std::vector<std::string> kQuotedEmailParts = {"o'brien@example.org", "o'brien", "brien", "example.org"};

class ErrorRedactionTest : public DbTest {
protected:
    void SetUp() override {
        DbTest::SetUp();
        table_ = "users_redaction_" + std::to_string(::getpid());
        pool().acquire()->execute_unprepared("DROP TABLE IF EXISTS " + table_);
        pool().acquire()->execute_unprepared(
            "CREATE TABLE " + table_ +
            " (id BIGINT AUTO_INCREMENT PRIMARY KEY, email VARCHAR(190) NOT NULL, age INT NULL,"
            " nick VARCHAR(4) NULL, UNIQUE KEY email_unique (email)) ENGINE=InnoDB");
        previous_ = logger();
        auto capture = std::make_shared<spdlog::logger>(
            "capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log_));
        capture->set_level(spdlog::level::trace);
        set_logger(capture);
    }

    void TearDown() override {
        set_logger(previous_);
        pool().acquire()->execute_unprepared("DROP TABLE IF EXISTS " + table_);
        DbTest::TearDown();
    }

    std::string insert_sql() const { return "INSERT INTO " + table_ + " (email, age, nick) VALUES (?, ?, ?)"; }

    // The DbError of running `sql` with `params`; fails the test when it succeeds.
    DbError error_of(const std::string& sql, const SqlParams& params) {
        try {
            pool().execute(sql, params);
        } catch (const DbError& e) {
            return e;
        }
        ADD_FAILURE() << "no error from " << sql;
        return DbError("none", 0, "");
    }

    void expect_absent(const std::vector<std::string>& parts, const DbError& e) {
        const std::string what = e.what();
        const std::string log = log_.str();
        for (const std::string& part : parts) {
            EXPECT_EQ(what.find(part), std::string::npos) << "'" << part << "' in what(): " << what;
            EXPECT_EQ(log.find(part), std::string::npos) << "'" << part << "' in the log: " << log;
        }
        EXPECT_NE(log.find("mysql error"), std::string::npos) << "the error was not logged: " << log;
    }

    std::string table_;
    std::ostringstream log_;
    std::shared_ptr<spdlog::logger> previous_;
};

TEST_F(ErrorRedactionTest, ADuplicateEmailKeepsCodeStateKeyAndStatementButNotTheAddress) {
    pool().execute(insert_sql(), {"jane.roe@example.com", 30, nullptr});
    const DbError e = error_of(insert_sql(), {"jane.roe@example.com", 31, nullptr});
    EXPECT_EQ(e.code(), 1062);  // ER_DUP_ENTRY
    EXPECT_EQ(e.sql_state(), "23000");
    const std::string what = e.what();
    EXPECT_NE(what.find("Duplicate entry '?' for key 'email_unique'"), std::string::npos) << what;
    EXPECT_NE(what.find(insert_sql()), std::string::npos) << "the statement's shape is kept: " << what;
    expect_absent(kEmailParts, e);
}

TEST_F(ErrorRedactionTest, AnAddressWithAQuoteInsideIsRedactedWhole) {
    pool().execute(insert_sql(), {"o'brien@example.org", 30, nullptr});
    const DbError e = error_of(insert_sql(), {"o'brien@example.org", 30, nullptr});
    EXPECT_EQ(e.code(), 1062);
    EXPECT_NE(std::string(e.what()).find("Duplicate entry '?' for key 'email_unique'"), std::string::npos)
        << e.what();
    expect_absent(kQuotedEmailParts, e);
}

TEST_F(ErrorRedactionTest, AValueThatImitatesTheKeyClauseIsRedactedWhole) {
    const std::string crafted = "x' for key 'leaked-part";
    pool().execute(insert_sql(), {crafted, 30, nullptr});
    const DbError e = error_of(insert_sql(), {crafted, 30, nullptr});
    EXPECT_EQ(e.code(), 1062);
    EXPECT_NE(std::string(e.what()).find("for key 'email_unique'"), std::string::npos) << e.what();
    expect_absent({"leaked-part"}, e);
}

TEST_F(ErrorRedactionTest, AValueThatIsNotANumberKeepsTheColumnButNotTheValue) {
    const DbError e = error_of(insert_sql(), {"a@b.example", "jane.roe@example.com", nullptr});
    EXPECT_EQ(e.code(), 1366);  // ER_TRUNCATED_WRONG_VALUE_FOR_FIELD
    EXPECT_EQ(e.sql_state(), "22007");
    EXPECT_NE(std::string(e.what()).find("`age`"), std::string::npos) << e.what();
    expect_absent(kEmailParts, e);
}

TEST_F(ErrorRedactionTest, DataTooLongNamesTheColumnAndHasNoValueToHide) {
    const DbError e = error_of(insert_sql(), {"c@d.example", 1, "jane.roe@example.com"});
    EXPECT_EQ(e.code(), 1406);  // ER_DATA_TOO_LONG
    EXPECT_EQ(e.sql_state(), "22001");
    EXPECT_NE(std::string(e.what()).find("Data too long for column 'nick'"), std::string::npos) << e.what();
    expect_absent(kEmailParts, e);
}

TEST_F(ErrorRedactionTest, AWrongTypeReadDoesNotQuoteTheValue) {
    pool().execute(insert_sql(), {"jane.roe@example.com", 30, nullptr});
    std::optional<Row> row = pool().query_one("SELECT email FROM " + table_ + " WHERE age = ?", {30});
    ASSERT_TRUE(row);
    try {
        row->get<std::int64_t>("email");
        FAIL() << "read a string as int64";
    } catch (const ProtocolError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("'email'"), std::string::npos) << what;
        for (const std::string& part : kEmailParts) EXPECT_EQ(what.find(part), std::string::npos) << what;
    }
    try {
        row->at("email").as_double();
        FAIL() << "read a string as double";
    } catch (const ProtocolError& e) {
        for (const std::string& part : kEmailParts)
            EXPECT_EQ(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace lockstep::test
