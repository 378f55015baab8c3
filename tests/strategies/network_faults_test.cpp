// The network between a repository and its servers, faulted by a FaultProxy: a writer whose
// Redis link goes silent right after COMMIT (its delete times out, the entry stays stale until
// the retry queue lands the delete once the link passes again), and MariaDB blackholed in the
// middle of a transaction (a typed error within about twice read_timeout, nothing half-written).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "eventually.h"
#include "lockstep/core/uri.h"
#include "lockstep/servers/fault_proxy.h"
#include "lockstep/strategies/outbox.h"
#include "lockstep/servers/proxied_url.h"
#include "strategies_test_support.h"
#include "test_servers.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

long long ms_since(Clock::time_point start) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

std::unique_ptr<FaultProxy> proxy_for(const std::string& url) {
    const auto endpoints = url_endpoints(url);
    return std::make_unique<FaultProxy>(endpoints.front().host, endpoints.front().port);
}

TEST(RepositoryNetworkFaultsTest, AWriterCutOffFromRedisAfterCommitIsStaleOnlyUntilItsRetryQueueDeletes) {
    if (servers().redis_is_cluster()) GTEST_SKIP() << "one proxy per endpoint: single-node Redis only";
    ProductCleanup cleanup;
    auto proxy = proxy_for(servers().redis_url());
    RedisOptions ro = parse_redis_url(proxied_redis_url(servers().redis_url(), *proxy));
    ro.connect_timeout = 300ms;
    ro.socket_timeout = 300ms;
    RedisClient writer_redis(ro);
    RepositoryOptions o;
    o.key_prefix = unique_key_prefix();
    o.cache_retry_after = 100ms;
    o.delete_retry_initial = 20ms;
    o.delete_retry_max = 200ms;
    CachedRepository<Product> writer(product_entity(), db(), writer_redis, o);
    CachedRepository<Product> reader(product_entity(), db(), redis(), o);
    const auto id = cleanup.add(unique_id());
    insert_product(id, 1);
    ASSERT_EQ(reader.get(id)->price, 1);
    ASSERT_TRUE(cached_entry(reader.key_of(id))) << "the old value is cached";

    fault::ArmOptions once;
    once.times = 1;
    once.only_thread = std::this_thread::get_id();
    auto cut = fault::arm(std::string(repo_points::after_commit), [&] { proxy->blackhole(); }, once);
    const auto errors_before = writer.metrics().cache_errors;
    const auto start = Clock::now();
    writer.update(id, [](Product& p) { p.price = 2; });
    const auto update_ms = ms_since(start);
    std::printf("[ measure  ] update with its delete blackholed returned after %lld ms (socket_timeout 300 ms)\n",
                update_ms);
    EXPECT_LT(update_ms, 2000) << "the delete is bounded by the socket timeout, not hung";
    EXPECT_GT(writer.metrics().cache_errors, errors_before) << "the failed delete is counted";
    EXPECT_EQ(writer.metrics().deletes_pending, 1u) << "and queued";
    EXPECT_EQ(db_price(id), 2) << "the write committed";
    EXPECT_EQ(freshness(reader.key_of(id), id), Freshness::Stale) << "the entry is stale while cut off";

    const auto healed = Clock::now();
    proxy->pass();
    ASSERT_TRUE(eventually([&] { return freshness(reader.key_of(id), id) == Freshness::Fresh; }, 20s))
        << to_string(writer.metrics());
    const auto stale_after_heal_ms = ms_since(healed);
    std::printf("[ measure  ] stale for %lld ms after the link passed again (retry max 200 ms)\n",
                stale_after_heal_ms);
    EXPECT_LT(stale_after_heal_ms, 5000);
    EXPECT_TRUE(eventually([&] { return writer.metrics().deletes_pending == 0; }, 5s));
    EXPECT_EQ(reader.get(id)->price, 2);
}

TEST(RepositoryNetworkFaultsTest, AWriterCutOffFromRedisAfterCommitIsStaleOnlyUntilAnotherProcessReplaysItsOutbox) {
    if (servers().redis_is_cluster()) GTEST_SKIP() << "one proxy per endpoint: single-node Redis only";
    ProductCleanup cleanup;
    auto proxy = proxy_for(servers().redis_url());
    RedisOptions ro = parse_redis_url(proxied_redis_url(servers().redis_url(), *proxy));
    ro.connect_timeout = 300ms;
    ro.socket_timeout = 300ms;
    RedisClient writer_redis(ro);
    OutboxOptions oo;
    oo.bound = 600ms;
    oo.replay_every = 100ms;
    // The writer's outbox reaches Redis through the same cut link; the replayer is another
    // process's outbox, with a link of its own.
    auto writer_outbox = std::make_shared<Outbox>(db(), make_redis_entry_store(writer_redis), oo);
    Outbox replayer(db(), make_redis_entry_store(redis()), oo);
    RepositoryOptions o;
    o.key_prefix = unique_key_prefix();
    o.outbox = writer_outbox;
    CachedRepository<Product> writer(product_entity(), db(), writer_redis, o);
    RepositoryOptions plain;
    plain.key_prefix = o.key_prefix;
    CachedRepository<Product> reader(product_entity(), db(), redis(), plain);
    const auto id = cleanup.add(unique_id());
    insert_product(id, 1);
    ASSERT_EQ(reader.get(id)->price, 1);

    fault::ArmOptions once;
    once.times = 1;
    once.only_thread = std::this_thread::get_id();
    auto cut = fault::arm(std::string(repo_points::after_commit), [&] { proxy->blackhole(); }, once);
    const auto committed = Clock::now();
    writer.update(id, [](Product& p) { p.price = 2; });
    EXPECT_EQ(db_price(id), 2);
    ASSERT_TRUE(eventually([&] { return freshness(reader.key_of(id), id) == Freshness::Fresh; }, 20s))
        << "the replayer deletes the key while the writer is still cut off";
    const auto stale_ms = ms_since(committed);
    std::printf("[ measure  ] stale for %lld ms after COMMIT with the writer still cut off (bound 600 ms + "
                "replay_every 100 ms)\n",
                stale_ms);
    EXPECT_GE(stale_ms, 500) << "not before the bound: the delete came from the replay";
    EXPECT_LT(stale_ms, 600 + 100 + 2000);
    // The replay counts a row after its key's delete landed: the key may be gone first.
    EXPECT_TRUE(eventually([&] { return replayer.metrics().replayed + writer_outbox->metrics().replayed >= 1u; }, 10s))
        << "the key turned fresh, but no outbox replayed a row";
    proxy->pass();
}

TEST(RepositoryNetworkFaultsTest, MariadbBlackholedMidTransactionFailsTypedWithinTwiceTheTimeoutAndWritesNothing) {
    if (servers().redis_is_cluster()) GTEST_SKIP() << "single-node servers only";
    ProductCleanup cleanup;
    const std::string mysql_url = servers().mysql_url();
    auto proxy = proxy_for(mysql_url);
    const auto read_timeout = 1000ms;
    MysqlPool proxied_db(parse_mysql_url(
        with_query_param(with_query_param(proxied_mysql_url(mysql_url, *proxy), "read_timeout", "1000ms"),
                         "write_timeout", "1000ms")));
    RepositoryOptions o;
    o.key_prefix = unique_key_prefix();
    CachedRepository<Product> writer(product_entity(), proxied_db, redis(), o);
    const auto id = cleanup.add(unique_id());
    insert_product(id, 1);
    ASSERT_EQ(writer.get(id)->price, 1);

    fault::ArmOptions once;
    once.times = 1;
    once.only_thread = std::this_thread::get_id();
    auto cut = fault::arm(std::string(repo_points::before_commit), [&] { proxy->blackhole(); }, once);
    const auto start = Clock::now();
    bool typed = false;
    try {
        writer.update(id, [](Product& p) { p.price = 2; });
    } catch (const DbError&) {
        typed = true;
    } catch (const ConnectionError&) {
        typed = true;
    }
    const auto failed_ms = ms_since(start);
    std::printf("[ measure  ] COMMIT blackholed: typed error after %lld ms (read_timeout %lld ms)\n", failed_ms,
                static_cast<long long>(read_timeout.count()));
    EXPECT_TRUE(typed) << "a typed error, not success";
    EXPECT_LT(failed_ms, 2 * read_timeout.count() + 500);
    proxy->pass();
    EXPECT_TRUE(eventually([&] { return db_price(id) == 1; }, 15s)) << "the uncommitted write rolls back";
    EXPECT_EQ(db_price(id), 1);
    EXPECT_NE(freshness(writer.key_of(id), id), Freshness::Stale);
    const auto entry = cached_entry(writer.key_of(id));
    if (entry && entry->kind == CacheEntry::Kind::Value) {
        EXPECT_LE(entry->version, db_version(id).value_or(0)) << "the cache holds no version the DB lacks";
    }
}

}  // namespace
}  // namespace lockstep::test
