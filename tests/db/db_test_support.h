// Shared by the db tests: options for the private MariaDB, unique product ids per test, and a
// fixture that creates the schema once and deletes every row a test created.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lockstep/db/db.h"
#include "lockstep/servers/demo_schema.h"
#include "test_servers.h"

namespace lockstep::test {

inline MysqlOptions db_options() {
    MysqlOptions o = servers().mysql_options();
    o.pool_wait_timeout = std::chrono::seconds(5);
    return o;
}

// Product ids no other test, test binary or earlier run of this binary is using:
// <pid> * 10^6 + <counter>.
inline std::int64_t unique_id() {
    static std::atomic<std::int64_t> counter{0};
    return static_cast<std::int64_t>(::getpid()) * 1'000'000 + counter.fetch_add(1) + 1;
}

class DbTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        MysqlPool pool(db_options());
        lockstep::testing::bootstrap_demo_schema(pool);
    }

    void SetUp() override { pool_ = std::make_unique<MysqlPool>(db_options()); }

    void TearDown() override {
        // A fresh pool: the test may have restarted the server or broken its own pool.
        MysqlPool cleanup(db_options());
        for (std::int64_t id : products_) cleanup.execute("DELETE FROM products WHERE id = ?", {id});
        for (std::int64_t id : outbox_) cleanup.execute("DELETE FROM outbox WHERE id = ?", {id});
    }

    // Inserts a product that TearDown deletes again.
    std::int64_t make_product(int stock = 10, std::int64_t price = 1999) {
        const std::int64_t id = unique_id();
        products_.push_back(id);
        pool().execute("INSERT INTO products (id, name, price, stock) VALUES (?, ?, ?, ?)",
                       {id, "product " + std::to_string(id), price, stock});
        return id;
    }

    int stock_of(std::int64_t id) {
        MysqlPool fresh(db_options());
        return fresh.query_one("SELECT stock FROM products WHERE id = ?", {id})->get<int>("stock");
    }

    void forget_outbox_row_later(std::int64_t id) { outbox_.push_back(id); }

    MysqlPool& pool() { return *pool_; }

private:
    std::unique_ptr<MysqlPool> pool_;
    std::vector<std::int64_t> products_;
    std::vector<std::int64_t> outbox_;
};

}  // namespace lockstep::test
