// DB authority: the database as the stock authority, one conditional UPDATE per order
// (docs/races.md O1: `UPDATE products SET stock = stock - 1 WHERE id = ? AND stock >= 1`), 16
// workers on one hot row. It is shown, not judged: InnoDB's row lock serialises the orders,
// so this is the database's own limit. The baseline is the same statement through raw
// Connector/C++ prepared statements (one connection per worker), so the row also shows what
// MysqlPool adds on top of the driver.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <cppconn/connection.h>
#include <cppconn/driver.h>
#include <cppconn/prepared_statement.h>
#include <mysql_driver.h>

#include "families.h"

namespace lockstep::bench {

namespace {

constexpr int kWorkers = 16;
constexpr const char* kOrder = "UPDATE products SET stock = stock - 1 WHERE id = ? AND stock >= 1";

// One raw driver connection and its prepared statement per worker, opened before timing.
struct RawWorker {
    std::unique_ptr<sql::Connection> conn;
    std::unique_ptr<sql::PreparedStatement> order;
};

std::vector<RawWorker> open_raw_workers(const MysqlOptions& o, int n) {
    sql::Driver* driver = sql::mysql::get_driver_instance();
    std::vector<RawWorker> workers(n);
    for (auto& w : workers) {
        sql::ConnectOptionsMap props;
        props["hostName"] = sql::SQLString("tcp://" + o.host + ":" + std::to_string(o.port));
        props["userName"] = sql::SQLString(o.user);
        props["password"] = sql::SQLString(o.password);
        props["schema"] = sql::SQLString(o.database);
        w.conn.reset(driver->connect(props));
        w.order.reset(w.conn->prepareStatement(kOrder));
    }
    return workers;
}

// Places orders until Google Benchmark has enough; `order` says whether the row took it.
void run_orders(benchmark::State& state, const std::function<bool()>& order) {
    std::string error;
    for (auto _ : state) {
        try {
            if (!order()) error = "the conditional UPDATE refused an order";
        } catch (const std::exception& e) {
            error = e.what();
        }
    }
    state.counters["orders"] =
        benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
    if (!error.empty()) state.SkipWithError(error.c_str());
}

}  // namespace

void register_db_authority(Environment& env, Plan& plan) {
    const Budget& b = env.budget();
    const std::int64_t ours_id = env.new_ids(1);
    const std::int64_t raw_id = env.new_ids(1);
    // INT column: two billion units never run out within a run.
    env.insert_product(ours_id, 2'000'000'000);
    env.insert_product(raw_id, 2'000'000'000);
    auto raw = std::make_shared<std::vector<RawWorker>>(open_raw_workers(env.mysql_options(), kWorkers));
    MysqlPool* db = &env.db();

    benchmark::RegisterBenchmark("db_authority/ours_mysql_pool",
                                 [db, ours_id](benchmark::State& state) {
                                     run_orders(state, [&] { return db->execute(kOrder, {ours_id}) == 1; });
                                 })
        ->Threads(kWorkers)
        ->UseRealTime()
        ->MinTime(b.throughput_min_time)
        ->Repetitions(b.throughput_repetitions);
    benchmark::RegisterBenchmark("db_authority/raw_connector",
                                 [raw, raw_id](benchmark::State& state) {
                                     RawWorker& w = (*raw)[state.thread_index()];
                                     w.order->setInt64(1, raw_id);
                                     run_orders(state, [&] { return w.order->executeUpdate() == 1; });
                                 })
        ->Threads(kWorkers)
        ->UseRealTime()
        ->MinTime(b.throughput_min_time)
        ->Repetitions(b.throughput_repetitions);

    plan.add(
        row_order::kDbAuthority, "DB authority (conditional UPDATE, 16 workers, 1 row)", "— (the DB's limit)",
        {"db_authority/ours_mysql_pool", "db_authority/raw_connector"}, [](const Results& r) {
            TableRow row = rate_row(r, "db_authority/ours_mysql_pool", "db_authority/raw_connector", "orders",
                                    0, "orders");
            row.notes =
                "baseline: the same statement through raw Connector/C++ prepared statements; InnoDB's row "
                "lock serialises every order, so this is the ceiling when the DB alone decides; "
                "repetitions " +
                spread(r, "db_authority/ours_mysql_pool", "orders") + " vs " +
                spread(r, "db_authority/raw_connector", "orders") + " orders/s";
            return row;
        });
}

}  // namespace lockstep::bench
