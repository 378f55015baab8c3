// RACES L8, failover loses the lock, forced on a real master + replica (LocalRedisReplication):
// replication is held back (the replica cannot resync), A locks on the master, the master is
// SIGKILLed, the replica is promoted, B locks on it. Reproduced without protection (both hold,
// both write), then the same interleaving closed by WAIT (A's acquisition fails un-replicated)
// and by fencing (A's late write is refused by MySQL). Redlock's closure is tested in locks/redlock.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"
#include "lockstep/db/fenced_write.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/locks/lock_client.h"
#include "lockstep/locks/lock_errors.h"
#include "lockstep/locks/lock_service.h"
#include "lockstep/locks/redis_lock_service.h"
#include "lockstep/locks/redis_mutex.h"
#include "lockstep/servers/local_redis_replication.h"
#include "test_servers.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;

// One client process's view: its own RedisClient and lock client on the master it was given.
struct Client {
    explicit Client(const RedisOptions& redis, LockClientOptions options = {})
        : redis(redis), locks(this->redis, [&] {
              options.prefix = prefix();
              return options;
          }()) {}
    static const std::string& prefix() {
        static const std::string p = test::unique_prefix();
        return p;
    }
    RedisClient redis;
    RedisLockClient locks;
};

// The row both holders write: `writes` counts the writes that applied, `name` says whose came last.
class L8Failover : public ::testing::Test {
protected:
    void SetUp() override {
        pool = std::make_unique<MysqlPool>(test::servers().mysql_options());
        pool->execute(
            "CREATE TABLE IF NOT EXISTS l8_stock (id BIGINT PRIMARY KEY, name VARCHAR(64) NOT NULL, "
            "writes INT NOT NULL, fence BIGINT NOT NULL DEFAULT 0)");
        row = 100 + ::getpid() % 100000;
        pool->execute("REPLACE INTO l8_stock (id, name, writes, fence) VALUES (?, 'start', 0, 0)", {row});
    }
    void TearDown() override { pool->execute("DELETE FROM l8_stock WHERE id = ?", {row}); }

    void plain_write(const std::string& who) {
        pool->execute("UPDATE l8_stock SET name = ?, writes = writes + 1 WHERE id = ?", {who, row});
    }
    void fenced_write(const std::string& who, FenceToken token) {
        fenced_update(*pool, row, token,
                      {.assignments = "name = ?, writes = writes + 1", .params = {who}, .table = "l8_stock"});
    }
    long long writes() { return pool->query_one("SELECT writes FROM l8_stock WHERE id = ?", {row})->get<std::int64_t>("writes"); }
    std::string last_writer() { return pool->query_one("SELECT name FROM l8_stock WHERE id = ?", {row})->get<std::string>("name"); }

    std::unique_ptr<MysqlPool> pool;
    long long row = 0;
    LocalRedisReplication redis;
};

TEST_F(L8Failover, WithoutProtectionBothClientsHoldAndBothWrite) {
    Client a(redis.master_options());
    RedisMutex ma(a.locks, "stock", {.lease = 30s});
    redis.hold_back_replication();
    ASSERT_TRUE(ma.try_lock());
    redis.fail_over();

    Client b(redis.replica_options());
    RedisMutex mb(b.locks, "stock", {.lease = 30s});
    ASSERT_TRUE(mb.try_lock()) << "the promoted replica never had A's key";
    // Both hold: A's lease has not run out, and nothing told A its master is gone.
    EXPECT_FALSE(ma.lost());
    EXPECT_FALSE(mb.lost());
    plain_write("B");
    plain_write("A");
    EXPECT_EQ(writes(), 2);
    EXPECT_EQ(last_writer(), "A") << "A's write, made under a lock it no longer had, is the one that stands";
    mb.unlock();
    ma.unlock();  // the master is gone: reported, never thrown
}

TEST_F(L8Failover, ClosedByWaitTheUnreplicatedAcquisitionFails) {
    // Through the lock service URL, as a deployment would configure it. Generous timeouts: the
    // replica's acknowledgement must arrive in time on a loaded machine.
    auto service = open_lock_service(redis.master_url() + "?socket_timeout=5s&wait_replicas=1&wait_timeout=2s",
                                     {.prefix = Client::prefix()});
    auto ma = service->make_mutex("stock", {.lease = 30s});
    // Replication up: the replica acknowledges, the acquisition succeeds.
    ASSERT_TRUE(ma->try_lock());
    ma->unlock();

    redis.hold_back_replication();
    EXPECT_THROW(ma->try_lock(), ReplicationWaitError);
    EXPECT_EQ(ma->hold_count(), 0) << "A holds nothing after the refused acquisition";
    RedisClient master(redis.master_options());
    EXPECT_EQ(master.command({"EXISTS", Client::prefix() + "{stock}:lock"}).integer(), 0)
        << "the un-replicated hold was released on the master";
    redis.fail_over();

    Client b(redis.replica_options());
    RedisMutex mb(b.locks, "stock", {.lease = 30s});
    ASSERT_TRUE(mb.try_lock());
    plain_write("B");
    EXPECT_EQ(writes(), 1) << "only B ever held the lock";
    mb.unlock();
}

TEST_F(L8Failover, ClosedByFencingTheFirstHoldersLateWriteIsRefused) {
    Client a(redis.master_options());
    RedisMutex ma(a.locks, "stock", {.lease = 30s});
    redis.hold_back_replication();
    ASSERT_TRUE(ma.try_lock());
    const FenceToken token_a = ma.fence_token();
    redis.fail_over();

    Client b(redis.replica_options());
    RedisMutex mb(b.locks, "stock", {.lease = 30s});
    ASSERT_TRUE(mb.try_lock());  // both hold, as without protection
    const FenceToken token_b = mb.fence_token();
    // The promoted replica never saw A's token; the server-clock floor still puts B's above it.
    EXPECT_GT(token_b, token_a);
    fenced_write("B", token_b);
    EXPECT_THROW(fenced_write("A", token_a), ConflictError);
    EXPECT_EQ(writes(), 1);
    EXPECT_EQ(last_writer(), "B");
    mb.unlock();
    ma.unlock();
}

TEST(ReplicationWaitOptions, UrlParametersAndBadValuesAreTypedErrors) {
    ReplicationWait w;
    EXPECT_EQ(take_replication_wait("redis://h:1?pool_size=4&wait_replicas=2&wait_timeout=250ms", w),
              "redis://h:1?pool_size=4");
    EXPECT_EQ(w.replicas, 2);
    EXPECT_EQ(w.timeout, 250ms);
    EXPECT_EQ(take_replication_wait("redis://h:1?wait_replicas=1", w), "redis://h:1");
    EXPECT_THROW(take_replication_wait("redis://h:1?wait_replicas=x", w), ConfigError);
    EXPECT_THROW(take_replication_wait("redis://h:1?wait_timeout=5parsecs", w), ConfigError);
    EXPECT_THROW(open_lock_service("redis://127.0.0.1:1?wait_replicas=-1"), ConfigError);

    RedisClient redis(test::servers().redis_options());
    LockClientOptions o;
    o.replication_wait = {.replicas = 1, .timeout = redis.options().socket_timeout};
    EXPECT_THROW(RedisLockClient(redis, o), ConfigError) << "a WAIT as long as the socket timeout breaks the connection";
    o.replication_wait = {.replicas = -1};
    EXPECT_THROW(RedisLockClient(redis, o), ConfigError);
}

}  // namespace
}  // namespace lockstep
