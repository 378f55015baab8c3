// The near cache (docs/near-cache.md) and race C12, against the private redis-server and
// MariaDB of this binary. Every "other process" is a second repository on its own connections
// (no near cache), so its writes reach this process only through Redis's tracking messages.
//
// C12 is forced, never waited for: the subscriber connection is killed with CLIENT KILL and its
// resubscription held at the fault point "near.before_subscribe" while the outside write runs,
// so the write's invalidation is certainly lost; a reader is held at "near.before_fill" between
// its tracked GET and its local fill. Without the drop rule (NearCacheOptions::drop_rule =
// false) the old value is served until the local TTL; with it, never.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "eventually.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/cache/redis_near_cache.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/db/db.h"
#include "lockstep/servers/demo_schema.h"
#include "lockstep/servers/fault_proxy.h"
#include "lockstep/servers/freshness_history.h"
#include "lockstep/strategies/strategies.h"
#include "test_servers.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

struct Product {
    std::int64_t id = 0;
    std::string name;
    std::int64_t price = 0;
    int stock = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Product, id, name, price, stock)

Entity<Product> product_entity() {
    Entity<Product> e;
    e.name = "product";
    e.table = "products";
    e.columns = {"name", "price", "stock"};
    e.from_row = [](const Row& r) {
        return Product{r.get<std::int64_t>("id"), r.get<std::string>("name"), r.get<std::int64_t>("price"),
                       r.get<int>("stock")};
    };
    e.to_columns = [](const Product& p) { return ColumnValues{{"name", p.name}, {"price", p.price}, {"stock", p.stock}}; };
    e.id_of = [](const Product& p) { return p.id; };
    return e;
}

MysqlPool& db() {
    static MysqlPool* pool = [] {
        auto* p = new MysqlPool(servers().mysql_options());
        lockstep::testing::bootstrap_demo_schema(*p);
        return p;
    }();
    return *pool;
}

RedisClient& redis() {
    static RedisClient* client = new RedisClient(servers().redis_options());
    return *client;
}

std::int64_t fresh_id() {
    static std::atomic<std::int64_t> counter{0};
    return static_cast<std::int64_t>(::getpid()) * 1'000'000 + counter.fetch_add(1) + 1;
}

// Calls of `command` the server has run so far (INFO commandstats).
std::uint64_t server_calls(const std::string& command) {
    const std::string info = redis().command({"INFO", "commandstats"}).str();
    const std::string tag = "cmdstat_" + command + ":calls=";
    const auto at = info.find(tag);
    if (at == std::string::npos) return 0;
    return std::stoull(info.substr(at + tag.size()));
}

// The id of the first client named `name` (CLIENT LIST), 0 if none.
std::int64_t client_id_named(const std::string& name) {
    const std::string list = redis().command({"CLIENT", "LIST"}).str();
    std::size_t line = 0;
    while (line < list.size()) {
        const auto end = list.find('\n', line);
        const std::string row = list.substr(line, end == std::string::npos ? std::string::npos : end - line);
        if (row.find(" name=" + name + " ") != std::string::npos) {
            return std::stoll(row.substr(row.find("id=") + 3));
        }
        if (end == std::string::npos) break;
        line = end + 1;
    }
    return 0;
}

class NearCacheRepositoryTest : public ::testing::Test {
protected:
    void SetUp() override {
        LOCKSTEP_REQUIRE_STANDALONE_REDIS("CLIENT TRACKING and CLIENT KILL are per node");
        prefix_ = unique_lock_prefix();
        id_ = fresh_id();
        db().execute("INSERT INTO products (id, name, price, stock, version) VALUES (?, 'n', 100, 5, 1)", {id_});
    }
    void TearDown() override { db().execute("DELETE FROM products WHERE id = ?", {id_}); }

    std::shared_ptr<RedisNearCache> make_near(bool drop_rule = true, RedisTrackingOptions tracking = {}) {
        NearCacheOptions n;
        n.ttl = 60s;
        n.drop_rule = drop_rule;
        near_ = std::make_shared<RedisNearCache>(servers().redis_options(), n, tracking);
        return near_;
    }
    std::unique_ptr<CachedRepository<Product>> repository(std::shared_ptr<RedisNearCache> near) {
        RepositoryOptions o;
        o.key_prefix = prefix_;
        o.ttl = 60s;
        o.near_cache = std::move(near);
        return std::make_unique<CachedRepository<Product>>(product_entity(), db(), redis(), o);
    }
    // Another process's repository: its own Redis connections, no near cache.
    std::unique_ptr<CachedRepository<Product>> outsider() { return repository(nullptr); }

    // Reads the row until this process's near cache holds it, with every invalidation sent
    // before it applied. The read after a miss may be refused its local fill, rightly: the miss's
    // own fill of Redis is announced on the channel too, and may arrive while that read is in
    // flight (or just after its fill).
    void hold_locally(CachedRepository<Product>& repo, std::int64_t id) {
        ASSERT_TRUE(eventually([&] {
            repo.get(id);
            sync_channel();
            return repo.metrics().near_entries == 1;
        })) << to_string(repo.metrics());
    }
    // A message of our own on the invalidation channel, waited for: Redis delivers in order, so
    // every invalidation sent before it has been applied once it is counted.
    void sync_channel() {
        RedisInvalidationChannel& channel = near_->channel();
        const auto before = channel.messages();
        redis().command({"PUBLISH", "__redis__:invalidate", prefix_ + "sync"});
        ASSERT_TRUE(eventually([&] { return channel.messages() > before; }, 10s));
    }
    void set_price(CachedRepository<Product>& repo, std::int64_t price) {
        repo.update(id_, [&](Product& p) { p.price = price; });
    }
    // Kills the subscriber connection and holds its resubscription at the gate until released.
    void kill_subscriber(RedisNearCache& near) {
        const auto id = near.channel().subscriber_id();
        ASSERT_NE(id, 0);
        ASSERT_EQ(redis().command({"CLIENT", "KILL", "ID", std::to_string(id)}).integer(), 1);
    }

    std::string prefix_;
    std::int64_t id_ = 0;
    std::shared_ptr<RedisNearCache> near_;  // the last one made
};

TEST_F(NearCacheRepositoryTest, ANearHitNeedsNoRoundTrip) {
    auto near = make_near();
    auto repo = repository(near);
    ASSERT_EQ(repo->get(id_)->price, 100);  // miss: loads and fills Redis
    hold_locally(*repo, id_);               // a tracked GET fills the near cache
    const auto gets = server_calls("get");
    const auto hits = repo->metrics().near_hits;
    for (int k = 0; k < 100; ++k) ASSERT_EQ(repo->get(id_)->price, 100);
    EXPECT_EQ(server_calls("get"), gets) << "a near hit sent a GET";
    EXPECT_EQ(repo->metrics().near_hits, hits + 100);
    EXPECT_GT(repo->metrics().near_bytes, 0u);
}

TEST_F(NearCacheRepositoryTest, AWriteFromAnotherConnectionInvalidatesTheLocalEntry) {
    auto near = make_near();
    auto repo = repository(near);
    auto other = outsider();
    hold_locally(*repo, id_);
    const auto before = repo->metrics().near_invalidations;
    set_price(*other, 200);
    // The write's DEL is announced on __redis__:invalidate; wait for it to be applied.
    ASSERT_TRUE(eventually([&] { return repo->metrics().near_entries == 0; }, 10s)) << to_string(repo->metrics());
    EXPECT_GT(repo->metrics().near_invalidations, before);
    EXPECT_EQ(repo->get(id_)->price, 200);
}

TEST_F(NearCacheRepositoryTest, ThisProcesssOwnWriteDropsItsLocalEntryBeforeItReturns) {
    auto near = make_near();
    auto repo = repository(near);
    hold_locally(*repo, id_);
    // Hold every tracking message back: only the write's own local drop can make this pass.
    fault::Gate hold;
    auto armed = fault::arm("near.before_invalidate", hold.action());
    set_price(*repo, 300);
    EXPECT_EQ(repo->metrics().near_entries, 0u);
    EXPECT_EQ(repo->get(id_)->price, 300);
    hold.open();
}

TEST_F(NearCacheRepositoryTest, EveryLocalEntryCarriesItsVersion) {
    auto near = make_near();
    auto repo = repository(near);
    hold_locally(*repo, id_);
    const auto entry = near->local().get(repo->key_of(id_));
    ASSERT_TRUE(entry.has_value());
    EXPECT_EQ(entry->version, 1);
}

TEST_F(NearCacheRepositoryTest, ALostTrackedReaderDropsTheNearCache) {
    auto near = make_near();
    auto repo = repository(near);
    hold_locally(*repo, id_);
    const auto drops = repo->metrics().near_drops;
    const auto reader = client_id_named("lockstep-near-reader");
    ASSERT_NE(reader, 0);
    ASSERT_EQ(redis().command({"CLIENT", "KILL", "ID", std::to_string(reader)}).integer(), 1);
    // The server forgot what that reader tracked: the idle check drops everything.
    ASSERT_TRUE(eventually([&] { return repo->metrics().near_drops > drops; }, 10s)) << to_string(repo->metrics());
    EXPECT_EQ(repo->metrics().near_entries, 0u);
}

TEST_F(NearCacheRepositoryTest, BroadcastModeSeesAnOutsideWrite) {
    RedisTrackingOptions tracking;
    tracking.mode = TrackingMode::Broadcast;
    tracking.prefixes = {prefix_ + "{product:"};
    auto near = make_near(true, tracking);
    auto repo = repository(near);
    auto other = outsider();
    hold_locally(*repo, id_);
    set_price(*other, 250);
    ASSERT_TRUE(eventually([&] { return repo->metrics().near_entries == 0; }, 10s)) << to_string(repo->metrics());
    EXPECT_EQ(repo->get(id_)->price, 250);
}

TEST_F(NearCacheRepositoryTest, ConcurrentReadersAndOutsideWritesLeaveNoStaleLocalEntry) {
    // More readers than tracked connections (pool_size 2): misses queue for a reader, and no
    // reader is closed to make room. When the writes are done and the channel is drained, every
    // local entry must carry the database's version. (Random interleavings, not forced: without
    // the per-key ticket, drop_rule = false, this caught a stale entry in about 1 run of 5.)
    RedisOptions small = servers().redis_options();
    small.pool_size = 2;
    NearCacheOptions n;
    n.ttl = 60s;
    near_ = std::make_shared<RedisNearCache>(small, n);
    auto repo = repository(near_);
    auto other = outsider();
    std::vector<std::int64_t> ids{id_};
    for (int k = 0; k < 3; ++k) {
        ids.push_back(fresh_id());
        db().execute("INSERT INTO products (id, name, price, stock, version) VALUES (?, 'n', 100, 5, 1)", {ids.back()});
    }
    std::atomic<bool> stop{false};
    std::vector<std::thread> readers;
    for (int t = 0; t < 6; ++t) {
        readers.emplace_back([&, t] {
            for (std::size_t k = static_cast<std::size_t>(t); !stop; ++k) repo->get(ids[k % ids.size()]);
        });
    }
    for (int w = 0; w < 40; ++w) other->update(ids[static_cast<std::size_t>(w) % ids.size()], [](Product& p) { ++p.price; });
    stop = true;
    for (auto& r : readers) r.join();
    sync_channel();
    for (const auto id : ids) {
        const auto local = near_->local().get(repo->key_of(id));
        if (!local) continue;
        const auto row = db().query_one("SELECT version FROM products WHERE id = ?", {id});
        EXPECT_EQ(local->version, row->get<std::int64_t>("version")) << "id " << id << " is stale in the near cache";
    }
    for (std::size_t k = 1; k < ids.size(); ++k) db().execute("DELETE FROM products WHERE id = ?", {ids[k]});
}

// The near cache under a mixed load, recorded as a history (docs/history-checker.md): 4 threads
// read 4 products through this process's near cache while another process (a repository of its
// own, no near cache) updates them. Each write counts as complete once its invalidation has been
// applied here: a marker entry is put into the local cache and its invalidation published after
// the write returned; Redis sends the write's invalidation before the DEL's reply and delivers in
// order, so the marker's removal proves the write's was applied. From then on no read may return
// an older version: a lost or misapplied invalidation would serve the old value until the local
// TTL (60 s), an anomaly.
TEST_F(NearCacheRepositoryTest, UnderAMixedLoadNoReadIsStaleOnceItsInvalidationWasApplied) {
    // Lease on both sides: with WriteThenDelete a reader's backfill may land in Redis after the
    // writer's DEL (C2, open without a lock), and the near cache would then rightly fetch that
    // stale entry; the near cache's own promise is what this test checks.
    const auto with_lease = [&](std::shared_ptr<RedisNearCache> n) {
        RepositoryOptions o;
        o.key_prefix = prefix_;
        o.ttl = 60s;
        o.strategy = std::make_shared<Lease>();
        o.near_cache = std::move(n);
        return std::make_unique<CachedRepository<Product>>(product_entity(), db(), redis(), o);
    };
    auto near = make_near();
    auto repo = with_lease(near);
    auto other = with_lease(nullptr);
    std::vector<std::int64_t> ids{id_};
    for (int k = 0; k < 3; ++k) {
        ids.push_back(fresh_id());
        db().execute("INSERT INTO products (id, name, price, stock, version) VALUES (?, 'n', 100, 5, 1)", {ids.back()});
    }
    FreshnessHistory history("near cache, another process writing");
    std::atomic<bool> stop{false};
    std::vector<std::thread> readers;
    for (int t = 0; t < 4; ++t) {
        readers.emplace_back([&, t] {
            for (std::size_t k = static_cast<std::size_t>(t); !stop; ++k) {
                const std::int64_t id = ids[k % ids.size()];
                const std::int64_t at = monotonic_us();
                const auto v = repo->get_versioned(id);
                history.read_done(t, std::to_string(id), at, v ? v->version : 0);
            }
        });
    }
    // Puts a marker into the local cache and waits until its published invalidation removed it.
    int markers = 0;
    const auto applied_here = [&] {
        const std::string marker = prefix_ + "marker:" + std::to_string(++markers);
        NearCache& local = near->local();
        ASSERT_TRUE(eventually([&] { return local.fill(marker, local.begin_fill(marker), 1, "m"); }, 10s));
        redis().command({"PUBLISH", "__redis__:invalidate", marker});
        ASSERT_TRUE(eventually([&] { return !local.peek(marker).has_value(); }, 10s)) << "the marker's invalidation";
    };
    constexpr int kWriter = 100;
    for (int w = 0; w < 60; ++w) {
        const std::int64_t id = ids[static_cast<std::size_t>(w) % ids.size()];
        const std::int64_t at = monotonic_us();
        other->update(id, [](Product& p) { ++p.price; });
        const auto version = db().query_one("SELECT version FROM products WHERE id = ?", {id})->get<std::int64_t>("version");
        applied_here();
        history.write_done(kWriter, std::to_string(id), at, version);
        std::this_thread::sleep_for(2ms);  // let the readers fill the new version locally again
    }
    stop = true;
    for (auto& r : readers) r.join();
    const FreshnessCheck check = history.check(std::chrono::microseconds(0));
    const auto m = repo->metrics();
    std::printf("[ measure  ] %s; near hits %llu of %llu reads\n", check.summary().c_str(),
                static_cast<unsigned long long>(m.near_hits), static_cast<unsigned long long>(check.reads));
    EXPECT_GT(check.reads, 200u);
    EXPECT_GT(m.near_hits, 100u) << "the reads were served by the near cache";
    EXPECT_TRUE(check.ok()) << check.describe();
    for (std::size_t k = 1; k < ids.size(); ++k) db().execute("DELETE FROM products WHERE id = ?", {ids[k]});
}

TEST_F(NearCacheRepositoryTest, AFlushOfTheServerDropsTheNearCache) {
    auto near = make_near();
    auto repo = repository(near);
    hold_locally(*repo, id_);
    const auto drops = repo->metrics().near_drops;
    redis().command({"FLUSHDB"}).throw_if_error();  // announced as a nil invalidation: every key changed
    ASSERT_TRUE(eventually([&] { return repo->metrics().near_drops > drops; }, 10s)) << to_string(repo->metrics());
    EXPECT_EQ(repo->metrics().near_entries, 0u);
    EXPECT_TRUE(near->channel().intact()) << "a flush is not a broken channel";
}

TEST_F(NearCacheRepositoryTest, ASilentPartitionOfTheChannelDropsTheNearCache) {
    // The near cache reaches Redis through a fault proxy that can drop packets while every
    // connection stays open: nothing closes, only the heartbeat can tell.
    const RedisOptions direct = servers().redis_options();
    FaultProxy proxy(direct.host, direct.port);
    RedisOptions through = direct;
    through.port = proxy.port();
    NearCacheOptions n;
    n.ttl = 60s;
    RedisTrackingOptions tracking;
    tracking.heartbeat = 50ms;
    near_ = std::make_shared<RedisNearCache>(through, n, tracking);
    auto repo = repository(near_);
    hold_locally(*repo, id_);
    const auto drops = repo->metrics().near_drops;
    proxy.blackhole();
    // Silent for 3 heartbeats: the channel counts as broken and the near cache is dropped.
    ASSERT_TRUE(eventually([&] { return repo->metrics().near_drops > drops; }, 10s)) << to_string(repo->metrics());
    EXPECT_EQ(repo->metrics().near_entries, 0u);
    EXPECT_FALSE(near_->channel().intact());
    proxy.pass();
    ASSERT_TRUE(eventually([&] { return near_->channel().intact(); }, 10s));
    EXPECT_EQ(repo->get(id_)->price, 100);
}

TEST_F(NearCacheRepositoryTest, AListenerThatRanLateKeepsAHealthyChannel) {
    // The listener thread stops inside the handling of one message for 8 heartbeats (as a busy
    // machine can stop it); the server stays healthy. It must read what arrived meanwhile and ask
    // before it calls the channel silent: no reconnect, no drop of the whole near cache.
    RedisTrackingOptions tracking;
    tracking.heartbeat = 50ms;
    auto near = make_near(true, tracking);
    auto repo = repository(near);
    hold_locally(*repo, id_);
    const auto connects = near->channel().connects();
    const auto drops = repo->metrics().near_drops;
    fault::Gate stall;
    auto armed = fault::arm("near.before_invalidate", stall.action());
    set_price(*repo, 200);  // its invalidation message stops the listener
    ASSERT_TRUE(stall.wait_arrivals(1, 10s)) << "no invalidation message reached the listener";
    std::this_thread::sleep_for(8 * tracking.heartbeat);
    stall.open();
    armed.disarm();
    hold_locally(*repo, id_);
    // Four more heartbeats: a channel judged silent would have reconnected by now.
    std::this_thread::sleep_for(4 * tracking.heartbeat);
    EXPECT_EQ(near->channel().connects(), connects);
    EXPECT_EQ(repo->metrics().near_drops, drops);
    EXPECT_TRUE(near->channel().intact());
    EXPECT_EQ(repo->get(id_)->price, 200);
}

// C12, an invalidation lost during a reconnect: parameter = the drop rule.
class NearCacheC12Test : public NearCacheRepositoryTest, public ::testing::WithParamInterface<bool> {};

TEST_P(NearCacheC12Test, AnInvalidationLostDuringAReconnect) {
    const bool drop_rule = GetParam();
    auto near = make_near(drop_rule);
    auto repo = repository(near);
    auto other = outsider();
    hold_locally(*repo, id_);
    ASSERT_EQ(repo->get(id_)->price, 100);

    fault::Gate resubscribe;
    auto armed = fault::arm("near.before_subscribe", resubscribe.action());
    kill_subscriber(*near);
    ASSERT_TRUE(resubscribe.wait_arrivals(1, 10s)) << "the subscriber did not try to reconnect";
    set_price(*other, 200);  // its invalidation goes to a client that no longer exists
    resubscribe.open();
    ASSERT_TRUE(eventually([&] { return near->channel().intact() && near->channel().connects() == 2; }, 10s));

    const auto price = repo->get(id_)->price;
    if (drop_rule) {
        EXPECT_EQ(price, 200) << "C12 closed: the near cache was dropped when the channel broke";
    } else {
        EXPECT_EQ(price, 100) << "C12 reproduced: the lost invalidation leaves the old value";
        EXPECT_EQ(repo->get(id_)->price, 100) << "and it stays until the local TTL";
    }
}

TEST_P(NearCacheC12Test, AReadThatStartedBeforeADropDoesNotFill) {
    const bool drop_rule = GetParam();
    auto near = make_near(drop_rule);
    auto repo = repository(near);
    auto other = outsider();
    repo->get(id_);  // Redis now holds v1

    // The reader has done its tracked GET (v1) and is about to fill locally.
    fault::Gate before_fill;
    auto fill_armed = fault::arm("near.before_fill", before_fill.action());
    std::atomic<std::int64_t> read_price{0};
    std::thread reader([&] { read_price = repo->get(id_)->price; });
    ASSERT_TRUE(before_fill.wait_arrivals(1, 10s));

    // Meanwhile the channel breaks, an outside write's invalidation is lost, the channel comes back.
    fault::Gate resubscribe;
    auto sub_armed = fault::arm("near.before_subscribe", resubscribe.action());
    kill_subscriber(*near);
    ASSERT_TRUE(resubscribe.wait_arrivals(1, 10s));
    set_price(*other, 200);
    resubscribe.open();
    ASSERT_TRUE(eventually([&] { return near->channel().intact() && near->channel().connects() == 2; }, 10s));

    before_fill.open();
    reader.join();
    EXPECT_EQ(read_price.load(), 100);  // what it read before the write: fine to return
    fill_armed.disarm();
    const auto price = repo->get(id_)->price;
    if (drop_rule) {
        EXPECT_EQ(price, 200) << "C12 closed: the fill of a read older than the drop was refused";
    } else {
        EXPECT_EQ(price, 100) << "C12 reproduced: the old read filled the near cache after the drop";
    }
}

INSTANTIATE_TEST_SUITE_P(DropRule, NearCacheC12Test, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "WithTheDropRule" : "WithoutTheDropRule"; });

}  // namespace
}  // namespace lockstep::test
