// The seeds' job (examples/jobs/close_unpaid_orders.h) on three nodes over Redis: each slot's
// stock is restored once, and the runners count what every slot came to.
#include <gtest/gtest.h>
#include <unistd.h>

#include "../../examples/jobs/close_unpaid_orders.h"
#include "../support/eventually.h"
#include "backends.h"
#include "lockstep/coordination/job_run_record.h"
#include "lockstep/db/mysql_pool.h"
#include "test_servers.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

TEST(CloseUnpaidOrdersTest, ThreeNodesRestoreAnExpiredOrdersStockOnce) {
    MysqlPool db(servers().mysql_options());
    JobRunRecord::create_table(db);
    db.execute("CREATE TABLE IF NOT EXISTS products (id BIGINT PRIMARY KEY, stock BIGINT NOT NULL)");
    db.execute("CREATE TABLE IF NOT EXISTS orders (id BIGINT PRIMARY KEY, product_id BIGINT NOT NULL, qty BIGINT NOT NULL,"
               " status VARCHAR(16) NOT NULL, created_at DATETIME NOT NULL)");
    const std::int64_t id = ::getpid() * 10;
    db.execute("INSERT INTO products (id, stock) VALUES (?, 0)", {id});
    db.execute("INSERT INTO orders VALUES (?, ?, 3, 'unpaid', UTC_TIMESTAMP() - INTERVAL 1 HOUR)", {id, id});
    const std::string prefix = "cuo" + std::to_string(::getpid()) + ":";
    std::vector<std::unique_ptr<LockService>> nodes;
    std::vector<std::unique_ptr<JobLock>> locks;
    std::vector<std::unique_ptr<JobRunner>> runners;
    for (int i = 0; i < 3; ++i) {
        nodes.push_back(open_backend("redis", prefix));
        locks.push_back(std::make_unique<JobLock>(*nodes.back(), "close-unpaid-" + std::to_string(id),
                                                  JobSchedule::every(1000ms), JobLockOptions{.run_record = &db}));
        runners.push_back(close_unpaid_orders(*locks.back(), db));
    }
    auto total = [&](auto field) {
        std::uint64_t n = 0;
        for (auto& r : runners) n += field(r->counts());
        return n;
    };
    ASSERT_TRUE(eventually([&] { return total([](const JobRunnerCounts& c) { return c.slots; }) >= 9; }, 20s));
    for (auto& r : runners) r->stop();
    EXPECT_EQ(db.query_one("SELECT stock FROM products WHERE id = ?", {id})->get<std::int64_t>("stock"), 3);
    const auto ran = total([](const JobRunnerCounts& c) { return c.ran; });
    EXPECT_EQ(static_cast<std::int64_t>(ran), JobRunRecord::count(db, "close-unpaid-" + std::to_string(id)))
        << "every run recorded its slot once";
    EXPECT_EQ(total([](const JobRunnerCounts& c) { return c.failed + c.overran + c.lost; }), 0u);
}

}  // namespace
}  // namespace lockstep::test
