// A short mixed load (4 clients, each its own repository, 4 hot products, 80% reads) recorded as a
// FreshnessHistory and checked: the strategy and lock-mode combinations that promise a read sees
// every write that returned before it began (docs/strategies.md: ReadWrite always; Mutex, and
// Lease and WriteThrough without a lock, close C1-C4 so no stale entry outlives its write) show
// no stale read at all; WriteThenDelete without a lock leaves C2 open, and its stale reads stay
// within its documented bound, the TTL (plus the longest read, which may backfill that late).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <chrono>
#include <iostream>
#include <random>
#include <thread>
#include <vector>

#include "lockstep/core/uri.h"
#include "lockstep/servers/fault_proxy.h"
#include "lockstep/servers/freshness_history.h"
#include "lockstep/servers/proxied_url.h"
#include "strategies_test_support.h"
#include "test_servers.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

// The products row with its version: update() returns the row as stored, so a write knows the
// exact version it wrote. The version is not cached (the entry's envelope carries it).
struct VersionedProduct {
    std::int64_t id = 0;
    std::string name;
    std::int64_t price = 0;
    int stock = 0;
    std::int64_t version = 0;
};

template <class Fields>
void lockstep_binary_fields(Fields& f, VersionedProduct& p) {
    f(p.id, p.name, p.price, p.stock);
}

Entity<VersionedProduct> versioned_product_entity() {
    Entity<VersionedProduct> e;
    e.name = "product";
    e.table = "products";
    e.columns = {"name", "price", "stock"};
    e.from_row = [](const Row& r) {
        return VersionedProduct{r.get<std::int64_t>("id"), r.get<std::string>("name"), r.get<std::int64_t>("price"),
                                r.get<int>("stock"), r.get<std::int64_t>("version")};
    };
    e.to_columns = [](const VersionedProduct& p) {
        return ColumnValues{{"name", p.name}, {"price", p.price}, {"stock", p.stock}};
    };
    e.id_of = [](const VersionedProduct& p) { return p.id; };
    return e;
}

struct Combo {
    std::string label;
    std::function<std::shared_ptr<const WriteStrategy>()> strategy;
    LockMode mode;
};

// How the load deviates from the default (every client reads and writes, 1 op in 5 a write,
// on the test's Redis).
struct Shape {
    std::function<RedisClient&(int)> redis_for;   // client c's Redis (a proxied one)
    std::function<void(RepositoryOptions&)> tune;  // adjusts each client's options
    std::function<bool(int)> writes;               // whether client c writes at all
    int keys = 4;
    int write_one_in = 5;                          // a writing client's share of writes
    std::atomic<std::uint64_t>* cache_errors = nullptr;  // sums the clients' failed cache operations
};

class FreshnessOfARepository : public ::testing::Test {
protected:
    static constexpr int kClients = 4;
    static constexpr int kKeys = 4;

    // Runs the load for `duration` and returns its history; the longest read, in `longest_read_us`.
    std::unique_ptr<FreshnessHistory> run(const Combo& combo, std::chrono::milliseconds duration,
                                          std::chrono::milliseconds ttl, std::int64_t& longest_read_us,
                                          const Shape& shape = {}) {
        const auto& redis_for = shape.redis_for;
        const auto& tune = shape.tune;
        auto* cache_errors = shape.cache_errors;
        const int keys = shape.keys;
        const std::string prefix = unique_key_prefix();
        std::vector<std::int64_t> ids;
        for (int k = 0; k < keys; ++k) {
            ids.push_back(cleanup_.add(unique_id()));
            insert_product(ids.back(), 1);
        }
        auto history = std::make_unique<FreshnessHistory>(combo.label);
        std::atomic<std::int64_t> longest{0};
        std::atomic<int> errors{0};
        const auto until = std::chrono::steady_clock::now() + duration;
        std::vector<std::thread> clients;
        for (int c = 0; c < kClients; ++c) {
            clients.emplace_back([&, c] {
                RepositoryOptions o;
                o.key_prefix = prefix;
                o.strategy = combo.strategy();
                o.lock_mode = combo.mode;
                if (combo.mode != LockMode::None) o.lock_service = &lock_service();
                o.lock_wait = 10s;
                o.ttl = ttl;
                o.ttl_jitter = 0ms;
                if (tune) tune(o);
                // Each client its own repository, as separate services sharing one cache.
                CachedRepository<VersionedProduct> repo(versioned_product_entity(), db(),
                                                        redis_for ? redis_for(c) : redis(), o);
                std::mt19937_64 rng(static_cast<std::uint64_t>(c) * 7919 + 1);
                std::uniform_int_distribution<int> pick_key(0, keys - 1), pick_op(0, shape.write_one_in - 1);
                const bool writer = !shape.writes || shape.writes(c);
                while (std::chrono::steady_clock::now() < until) {
                    const int k = pick_key(rng);
                    const std::string key = std::to_string(ids[k]);
                    const std::int64_t at = monotonic_us();
                    try {
                        if (writer && pick_op(rng) == 0) {
                            const auto stored = repo.update(ids[k], [](VersionedProduct& p) { p.price += 1; });
                            history->write_done(c, key, at, stored ? stored->version : 0);
                        } else {
                            const auto v = repo.get_versioned(ids[k]);
                            history->read_done(c, key, at, v ? v->version : 0);
                            const std::int64_t took = monotonic_us() - at;
                            std::int64_t seen = longest.load();
                            while (took > seen && !longest.compare_exchange_weak(seen, took)) {
                            }
                        }
                    } catch (const std::exception& e) {
                        ++errors;
                        ADD_FAILURE() << combo.label << ": " << e.what();
                    }
                }
                repo.settle(5s);
                if (cache_errors) cache_errors->fetch_add(repo.metrics().cache_errors);
            });
        }
        for (auto& t : clients) t.join();
        EXPECT_EQ(errors.load(), 0);
        longest_read_us = longest.load();
        return history;
    }

    ProductCleanup cleanup_;
};

TEST_F(FreshnessOfARepository, CombinationsThatPromiseFreshnessShowNoStaleReadUnderConcurrentLoad) {
    const std::vector<Combo> combos = {
        {"WriteThenDelete+ReadWrite", [] { return std::make_shared<WriteThenDelete>(); }, LockMode::ReadWrite},
        {"Lease+ReadWrite", [] { return std::make_shared<Lease>(); }, LockMode::ReadWrite},
        {"WriteThenDelete+Mutex", [] { return std::make_shared<WriteThenDelete>(); }, LockMode::Mutex},
        {"Lease+None", [] { return std::make_shared<Lease>(); }, LockMode::None},
        {"WriteThrough+None", [] { return std::make_shared<WriteThrough>(); }, LockMode::None},
    };
    for (const auto& combo : combos) {
        std::int64_t longest_read_us = 0;
        const auto history = run(combo, 1200ms, 10min, longest_read_us);
        const FreshnessCheck check = history->check(0us);
        std::cout << "[ measure ] " << check.summary() << ", " << check.writes << " writes\n";
        EXPECT_GT(check.reads, 100u) << combo.label;
        EXPECT_GT(check.writes, 10u) << combo.label;
        EXPECT_TRUE(check.ok()) << check.describe();
    }
}

TEST_F(FreshnessOfARepository, WriteThenDeleteWithoutALockIsStaleOnlyWithinItsTtl) {
    // C2 is open: a reader that loaded the old row and backfills after the writer's DEL leaves it
    // until the TTL. That backfill lands before the filling read returns, so no stale read can
    // come later than TTL + the longest read after the write it missed.
    constexpr auto kTtl = 1000ms;
    const Combo combo{"WriteThenDelete+None", [] { return std::make_shared<WriteThenDelete>(); }, LockMode::None};
    std::int64_t longest_read_us = 0;
    const auto history = run(combo, 2000ms, kTtl, longest_read_us);
    const auto bound = std::chrono::microseconds(std::chrono::microseconds(kTtl).count() + longest_read_us);
    const FreshnessCheck check = history->check(bound);
    std::cout << "[ measure ] " << check.summary() << ", " << check.writes << " writes (bound: TTL "
              << kTtl.count() << " ms + longest read " << longest_read_us / 1000 << " ms)\n";
    EXPECT_GT(check.reads, 100u);
    EXPECT_TRUE(check.ok()) << check.describe();
}

// The network as a fault (RACES C5 under a partition): half the clients reach Redis through a
// fault proxy that cycles through blackhole, latency and reset while the load runs. A write
// whose DEL fails there goes to its retry queue, so the other clients may read the old entry
// until the link passes again and the retry lands; never later. The bound: the longest cut as
// it happened, plus the retry's longest backoff, plus the longest read (which may backfill that
// late), plus two socket timeouts: a retried DEL sent into the cut waits its timeout out even
// when the link passes meanwhile, and the next attempt may meet the reset that follows. A lost
// delete would leave an entry stale for its TTL (10 minutes) until the next write of its key: an
// anomaly.
TEST_F(FreshnessOfARepository, UnderNetworkFaultsEveryStaleReadEndsWithinTheRetryBound) {
    if (servers().redis_is_cluster()) GTEST_SKIP() << "one proxy per endpoint: single-node Redis only";
    const auto endpoints = url_endpoints(servers().redis_url());
    FaultProxy proxy(endpoints.front().host, endpoints.front().port);
    constexpr auto kSocketTimeout = 200ms, kRetryMax = 100ms, kLongestCut = 300ms;
    RedisOptions ro = parse_redis_url(proxied_redis_url(servers().redis_url(), proxy));
    ro.connect_timeout = kSocketTimeout;
    ro.socket_timeout = kSocketTimeout;
    RedisClient proxied(ro);

    std::atomic<bool> done{false};
    std::atomic<std::int64_t> longest_cut_us{0};  // as it happened: a starved thread cuts longer
    std::thread faults([&] {
        // blackhole (the longest cut), latency, reset: each followed by a clean stretch.
        while (!done.load()) {
            const std::int64_t cut_at = monotonic_us();
            proxy.blackhole();
            std::this_thread::sleep_for(kLongestCut);
            proxy.pass();
            longest_cut_us = std::max(longest_cut_us.load(), monotonic_us() - cut_at);
            std::this_thread::sleep_for(200ms);
            proxy.latency(20ms, 10ms);
            std::this_thread::sleep_for(200ms);
            proxy.pass();
            std::this_thread::sleep_for(100ms);
            proxy.reset();
            std::this_thread::sleep_for(200ms);
        }
        proxy.pass();
    });
    const Combo combo{"WriteThenDelete+Mutex, faults on half the clients' Redis link",
                      [] { return std::make_shared<WriteThenDelete>(); }, LockMode::Mutex};
    std::int64_t longest_read_us = 0;
    std::atomic<std::uint64_t> cache_errors{0};
    // Only the proxied clients write, rarely, over 16 keys: a delete they lose is not hidden by
    // the next write of the same key coming a moment later.
    Shape shape;
    shape.redis_for = [&](int c) -> RedisClient& { return c % 2 == 0 ? proxied : redis(); };
    shape.writes = [](int c) { return c % 2 == 0; };
    shape.keys = 16;
    shape.write_one_in = 100;
    shape.tune = [&](RepositoryOptions& o) {
        o.delete_retry_initial = 20ms;
        o.delete_retry_max = kRetryMax;
        o.cache_retry_after = 100ms;
    };
    shape.cache_errors = &cache_errors;
    const auto history = run(combo, 3000ms, 10min, longest_read_us, shape);
    done = true;
    faults.join();
    const auto bound = std::chrono::microseconds(longest_cut_us.load() + longest_read_us) + 2 * kSocketTimeout +
                       kRetryMax;
    const FreshnessCheck check = history->check(bound);
    std::cout << "[ measure ] " << check.summary() << ", " << check.writes << " writes, " << cache_errors.load()
              << " failed cache operations (bound: longest cut " << longest_cut_us.load() / 1000
              << " ms + 2 x socket timeout " << kSocketTimeout.count() << " ms + retry " << kRetryMax.count()
              << " ms + longest read " << longest_read_us / 1000 << " ms)\n";
    EXPECT_GT(check.reads, 100u);
    EXPECT_GT(check.writes, 20u);
    EXPECT_GT(cache_errors.load(), 0u) << "the faults reached the proxied clients";
    EXPECT_TRUE(check.ok()) << check.describe();
}

}  // namespace
}  // namespace lockstep::test
