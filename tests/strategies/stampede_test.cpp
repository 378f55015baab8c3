// C6, the stampede: a key that is not cached is read by many readers at once, from many threads
// and from several processes. The stampede guard lets exactly one of them load it; the others
// wait for its value. The loader's database read is slowed down (fault point) so that every
// reader arrives while the load is in flight.
#include <gtest/gtest.h>

#include <atomic>
#include <regex>
#include <thread>
#include <vector>

#include "strategies_test_support.h"
#include "test_servers.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

using StampedeParam = std::tuple<std::string, LockMode>;

class StampedeTest : public ::testing::TestWithParam<StampedeParam> {
protected:
    RepositoryOptions options() const {
        RepositoryOptions o;
        o.key_prefix = prefix_;
        o.strategy = strategy_named(std::get<0>(GetParam()));
        o.lock_mode = std::get<1>(GetParam());
        o.lock_service = &lock_service();
        o.guard_wait = 10s;
        o.lock_wait = 10s;
        return o;
    }

    std::string prefix_ = unique_key_prefix();
    ProductCleanup cleanup_;
};

TEST_P(StampedeTest, C6_ConcurrentMissesFromManyThreadsCauseOneLoad) {
    const auto id = cleanup_.add(unique_id());
    insert_product(id, 4242);
    // Four repositories (as four application servers) with four threads each.
    std::vector<std::unique_ptr<CachedRepository<Product>>> repos;
    for (int r = 0; r < 4; ++r) {
        repos.push_back(std::make_unique<CachedRepository<Product>>(product_entity(), db(), redis(), options()));
    }
    auto slow = fault::arm(std::string(repo_points::after_db_read), fault::pause(300ms));
    std::atomic<bool> go{false};
    std::atomic<int> ok{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 16; ++t) {
        threads.emplace_back([&, t] {
            while (!go.load()) std::this_thread::yield();
            auto p = repos[t % 4]->get(id);
            if (p && p->price == 4242) ok.fetch_add(1);
        });
    }
    go = true;
    for (auto& t : threads) t.join();
    std::uint64_t loads = 0, waits = 0, timeouts = 0;
    for (auto& r : repos) {
        loads += r->metrics().loads;
        waits += r->metrics().guard_waits + r->metrics().lock_waits;
        timeouts += r->metrics().guard_timeouts;
    }
    EXPECT_EQ(ok.load(), 16) << "every reader got the value";
    EXPECT_EQ(loads, 1u) << "exactly one database load";
    EXPECT_EQ(timeouts, 0u);
    EXPECT_GT(waits, 0u) << "the others waited for the loader (or its lock)";
}

TEST_P(StampedeTest, C6_ConcurrentMissesFromFourProcessesCauseOneLoad) {
    const auto id = cleanup_.add(unique_id());
    insert_product(id, 777);
    const std::string go_key = prefix_ + "go";
    std::vector<std::unique_ptr<Child>> children;
    for (int c = 0; c < 4; ++c) {
        children.push_back(std::make_unique<Child>(
            "stampede", std::map<std::string, std::string>{{"ID", std::to_string(id)},
                                                           {"PRICE", "777"},
                                                           {"THREADS", "16"},
                                                           {"PREFIX", prefix_},
                                                           {"GO_KEY", go_key},
                                                           {"STRATEGY", std::get<0>(GetParam())},
                                                           {"LOCK", std::string(to_string(std::get<1>(GetParam())))}}));
    }
    for (auto& c : children) ASSERT_TRUE(c->expect("ready", 30s)) << "a child did not start";
    // The server's own count of SELECTs, as a check on the repositories' `loads`: only our
    // children query the private MariaDB meanwhile (external servers may have other clients).
    const bool count_on_server = servers().owns_mysql();
    auto com_select = [] {
        return std::stoll(db().query_one("SHOW GLOBAL STATUS LIKE 'Com_select'")->get<std::string>("Value"));
    };
    const auto c0 = count_on_server ? com_select() : 0;
    const auto c1 = count_on_server ? com_select() : 0;  // c1 - c0: what one look costs
    redis().set(go_key, "1", 60s);
    std::uint64_t loads = 0, ok = 0, waits = 0;
    const std::regex result(R"(result loads=(\d+) ok=(\d+) failed=(\d+) guard_waits=(\d+) guard_timeouts=(\d+))");
    for (auto& c : children) {
        auto line = c->expect("result", 60s);
        ASSERT_TRUE(line) << "a child did not report";
        std::smatch m;
        ASSERT_TRUE(std::regex_match(*line, m, result)) << *line;
        loads += std::stoull(m[1]);
        ok += std::stoull(m[2]);
        EXPECT_EQ(m[3], "0") << *line;
        waits += std::stoull(m[4]);
        EXPECT_EQ(m[5], "0") << *line;
        EXPECT_EQ(c->wait(), 0);
    }
    if (count_on_server) {
        const auto c2 = com_select();
        EXPECT_EQ(c2 - c1 - (c1 - c0), 1) << "MariaDB counted exactly one SELECT";
    }
    redis().del({go_key, prefix_ + "{product:" + std::to_string(id) + "}"});
    EXPECT_EQ(ok, 64u) << "4 processes x 16 threads got the value";
    EXPECT_EQ(loads, 1u) << "exactly one database load across processes";
    if (std::get<1>(GetParam()) != LockMode::Mutex) {
        EXPECT_GT(waits, 0u);
    }
}

INSTANTIATE_TEST_SUITE_P(
    Guards, StampedeTest,
    ::testing::Values(StampedeParam{"WriteThenDelete", LockMode::None}, StampedeParam{"Lease", LockMode::None},
                      StampedeParam{"WriteThrough", LockMode::None}, StampedeParam{"WriteThenDelete", LockMode::Mutex},
                      StampedeParam{"Lease", LockMode::ReadWrite}),
    [](const ::testing::TestParamInfo<StampedeParam>& info) {
        return std::get<0>(info.param) + "_" + std::string(to_string(std::get<1>(info.param)));
    });

class StampedeGuardTest : public ::testing::Test {
protected:
    std::string prefix_ = unique_key_prefix();
    ProductCleanup cleanup_;
};

TEST_F(StampedeGuardTest, C6_WithoutTheGuardEveryConcurrentMissLoads) {
    const auto id = cleanup_.add(unique_id());
    insert_product(id, 1);
    RepositoryOptions o;
    o.key_prefix = prefix_;
    o.stampede_guard = false;
    CachedRepository<Product> repo(product_entity(), db(), redis(), o);
    auto slow = fault::arm(std::string(repo_points::after_db_read), fault::pause(200ms));
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
        threads.emplace_back([&] {
            while (!go.load()) std::this_thread::yield();
            repo.get(id);
        });
    }
    go = true;
    for (auto& t : threads) t.join();
    EXPECT_EQ(repo.metrics().loads, 8u) << "C6 open: every reader went to the database";
}

TEST_F(StampedeGuardTest, AWaiterGivesUpAfterGuardWaitAndReadsWithoutFilling) {
    const auto id = cleanup_.add(unique_id());
    insert_product(id, 5);
    RepositoryOptions o;
    o.key_prefix = prefix_;
    o.guard_wait = 100ms;
    CachedRepository<Product> repo(product_entity(), db(), redis(), o);
    fault::Gate gate;
    Actor loader("loader", [&] {
        auto armed = arm_for_this_thread(repo_points::after_db_read, gate);
        EXPECT_EQ(repo.get(id)->price, 5);
    });
    ASSERT_TRUE(gate.wait_arrivals(1, 10s));
    auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(repo.get(id)->price, 5) << "the waiter falls back to the database";
    EXPECT_GE(std::chrono::steady_clock::now() - start, 100ms);
    EXPECT_EQ(cached_entry(repo.key_of(id))->kind, CacheEntry::Kind::Marker) << "the waiter did not fill";
    gate.open();
    loader.join();
    auto m = repo.metrics();
    EXPECT_EQ(m.guard_waits, 1u);
    EXPECT_EQ(m.guard_timeouts, 1u);
    EXPECT_EQ(m.loads, 2u);
    EXPECT_EQ(cached_entry(repo.key_of(id))->kind, CacheEntry::Kind::Value) << "the loader filled";
}

TEST_F(StampedeGuardTest, ALoaderThatFailsGivesItsMarkerBack) {
    const auto id = cleanup_.add(unique_id());
    insert_product(id, 5);
    RepositoryOptions o;
    o.key_prefix = prefix_;
    CachedRepository<Product> repo(product_entity(), db(), redis(), o);
    {
        fault::ArmOptions once;
        once.times = 1;
        auto failing = fault::arm(std::string(repo_points::after_db_read),
                                  fault::fail<ConnectionError>("injected: database read lost"), once);
        EXPECT_THROW(repo.get(id), ConnectionError);
    }
    EXPECT_FALSE(cached_entry(repo.key_of(id))) << "no marker left behind to make others wait";
    EXPECT_EQ(repo.get(id)->price, 5);
}

}  // namespace
}  // namespace lockstep::test
