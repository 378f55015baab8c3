// The demo schema (lockstep::testing) and the library's own outbox table: idempotent, safe
// concurrently, the tables have the promised shape, and a table of an older shape is reported.
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "db_test_support.h"
#include "lockstep/strategies/outbox.h"

namespace lockstep::test {
namespace {

class SchemaTest : public DbTest {};

TEST_F(SchemaTest, BootstrapTwiceIsHarmless) {
    lockstep::testing::bootstrap_demo_schema(pool());
    const std::int64_t id = make_product(3);
    lockstep::testing::bootstrap_demo_schema(pool());  // existing tables and their rows are left alone
    EXPECT_EQ(stock_of(id), 3);
    const auto tables = pool().query(
        "SELECT TABLE_NAME AS t, ENGINE AS e, TABLE_COLLATION AS c FROM information_schema.TABLES "
        "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN ('products', 'orders', 'outbox') ORDER BY "
        "TABLE_NAME");
    ASSERT_EQ(tables.size(), 3u);
    for (const Row& t : tables) {
        EXPECT_EQ(t.get<std::string>("e"), "InnoDB") << t.get<std::string>("t");
        EXPECT_EQ(t.get<std::string>("c").rfind("utf8mb4", 0), 0u) << t.get<std::string>("t");
    }
}

TEST_F(SchemaTest, BootstrapFromSeveralThreadsAtOnce) {
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int i = 0; i < 4; ++i) {
        threads.emplace_back([&] {
            try {
                MysqlPool own(db_options());
                lockstep::testing::bootstrap_demo_schema(own);
            } catch (const std::exception& e) {
                ADD_FAILURE() << e.what();
                ++failures;
            }
        });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(failures.load(), 0);
}

TEST_F(SchemaTest, ProductDefaultsAndOrderLifecycle) {
    const std::int64_t product = make_product(5, 2500);
    const auto p = pool().query_one("SELECT version, fence, price FROM products WHERE id = ?", {product});
    EXPECT_EQ(p->get<std::int64_t>("version"), 0);
    EXPECT_EQ(p->get<std::int64_t>("fence"), 0);
    EXPECT_EQ(p->get<std::int64_t>("price"), 2500);

    PooledMysqlConnection conn = pool().acquire();
    conn->execute("INSERT INTO orders (product_id, quantity) VALUES (?, ?)", {product, 2});
    const std::int64_t order = conn->last_insert_id();
    EXPECT_GT(order, 0);
    auto o = conn->query_one("SELECT status, created_at, updated_at FROM orders WHERE id = ?", {order});
    EXPECT_EQ(o->get<std::string>("status"), "unpaid");
    EXPECT_FALSE(o->get<std::string>("created_at").empty());
    EXPECT_EQ(conn->execute("UPDATE orders SET status = 'paid' WHERE id = ?", {order}), 1u);
    EXPECT_THROW(conn->execute("UPDATE orders SET status = 'lost' WHERE id = ?", {order}),
                 DbError);  // not in the ENUM
    conn->execute("DELETE FROM orders WHERE id = ?", {order});
}

TEST_F(SchemaTest, ATableMissingAColumnIsReportedNotIgnored) {
    // A private database, so the shared tables are not touched.
    const std::string db = "lockstep_schema_" + std::to_string(::getpid());
    PooledMysqlConnection admin = pool().acquire();
    admin->execute_unprepared("CREATE DATABASE IF NOT EXISTS " + db);
    struct DropDatabase {
        MysqlConnection& conn;
        std::string db;
        ~DropDatabase() { conn.execute_unprepared("DROP DATABASE IF EXISTS " + db); }
    } drop{*admin, db};

    MysqlOptions o = db_options();
    o.database = db;
    MysqlConnection conn(o);
    conn.execute_unprepared(
        "CREATE TABLE products (id BIGINT PRIMARY KEY, name VARCHAR(10), price BIGINT, "
        "stock INT, version BIGINT)");  // an older shape, without `fence`
    try {
        lockstep::testing::bootstrap_demo_schema(conn);
        FAIL() << "bootstrap accepted a products table without fence";
    } catch (const ConfigError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("'products'"), std::string::npos) << what;
        EXPECT_NE(what.find("'fence'"), std::string::npos) << what;
    }
}

TEST_F(SchemaTest, BootstrapWithoutADatabaseIsATypedError) {
    MysqlOptions o = db_options();
    o.database.clear();
    MysqlConnection conn(o);
    try {
        lockstep::testing::bootstrap_demo_schema(conn);
        FAIL() << "created tables without a database";
    } catch (const DbError& e) {
        EXPECT_EQ(e.code(), 1046);  // ER_NO_DB_ERROR
    }
}

TEST_F(SchemaTest, AServiceCreatesTheOutboxTableAloneAndAnOlderShapeIsReported) {
    const std::string db = "lockstep_outbox_" + std::to_string(::getpid());
    PooledMysqlConnection admin = pool().acquire();
    admin->execute_unprepared("DROP DATABASE IF EXISTS " + db);
    admin->execute_unprepared("CREATE DATABASE " + db);
    struct DropDatabase {
        MysqlConnection& conn;
        std::string db;
        ~DropDatabase() { conn.execute_unprepared("DROP DATABASE IF EXISTS " + db); }
    } drop{*admin, db};

    MysqlOptions o = db_options();
    o.database = db;
    MysqlPool service(o);
    create_outbox_table(service);
    create_outbox_table(service);  // idempotent
    const auto tables = service.query(
        "SELECT TABLE_NAME AS t FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()");
    ASSERT_EQ(tables.size(), 1u);
    EXPECT_EQ(tables[0].get<std::string>("t"), "outbox");

    service.execute("DROP TABLE outbox");
    service.execute("CREATE TABLE outbox (id BIGINT PRIMARY KEY, created_at DATETIME(3))");
    try {
        create_outbox_table(service);
        FAIL() << "accepted an outbox table without cache_key";
    } catch (const ConfigError& e) {
        EXPECT_NE(std::string(e.what()).find("'cache_key'"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace lockstep::test
