#include "backends.h"

#include <cstdlib>

#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"
#include "lockstep/locks/in_memory_lock_service.h"
#include "lockstep/locks/lock_keys.h"
#include "lockstep/locks/mysql_lock_service.h"
#include "lockstep/locks/redlock_lock_service.h"
#include "lockstep/servers/local_redis_group.h"
#include "lockstep/db/mysql_connection.h"
#include "test_servers.h"
#ifdef LOCKSTEP_HAVE_ZOOKEEPER
#include <iostream>

#include "lockstep/locks/zookeeper_lock_service.h"
#include "lockstep/servers/local_zookeeper.h"
#endif

namespace lockstep::test {

using namespace std::chrono_literals;

#ifdef LOCKSTEP_HAVE_ZOOKEEPER
// Started on first use (2-5 s of JVM start, measured and printed), stopped at exit.
LocalZooKeeper& zookeeper() {
    static LocalZooKeeper instance{LocalZooKeeperOptions{}};
    static const bool printed = [] {
        std::cout << "[ measure ] zookeeper: private server answered srvr after " << instance.startup_time().count()
                  << " ms\n";
        return true;
    }();
    (void)printed;
    return instance;
}
#endif

// Five independent masters for the redlock backend, started on first use, stopped at exit.
LocalRedisGroup& redlock_group() {
    static LocalRedisGroup instance{LocalRedisGroupOptions{}};
    return instance;
}

std::vector<std::string> every_backend() { return {"memory", "redis", "redis-fair", "mysql", "zookeeper", "redlock"}; }

std::string backend_test_name(std::string backend) {
    for (auto& c : backend) {
        if (c == '-') c = '_';
    }
    return backend;
}

std::string backend_url(const std::string& backend) {
    // A child process gets its parent's URL (it must not start servers of its own).
    if (const char* url = std::getenv("LOCKSTEP_CT_URL"); url && *url) return url;
    if (backend == "memory") return "memory:";
    if (backend == "redis") return servers().redis_url();
    if (backend == "mysql") return servers().mysql_url();
    if (backend == "redis-fair") {
        // redis://, rediss:// (the tls topology) or redis+cluster://: the fair scheme of each.
        const std::string url = servers().redis_url();
        const auto plain = url.find_first_of("+:");
        return url.substr(0, plain) + "-fair" + url.substr(plain);
    }
    // Redlock's own 250 ms per-master timeouts suit a quiet machine; CI's loaded 2 cores, with
    // 2 processes x 8 threads contending, can keep a master's reply past them (seen once: "3 of 5
    // masters answered"). These tests are about exclusion and loss, not that timeout.
    if (backend == "redlock") return redlock_group().redlock_url() + "?connect_timeout=1s&socket_timeout=1s";
#ifdef LOCKSTEP_HAVE_ZOOKEEPER
    // Short sessions, so a killed or stopped holder's nodes go within the test's bound.
    if (backend == "zookeeper") return zookeeper().url() + "?session_timeout_ms=1500";
#endif
    return "";
}

BackendTraits backend_traits(const std::string& backend) {
    BackendTraits t;
    t.name = backend;
    if (backend == "memory") {
        t.cross_process = false;
    } else if (backend == "redis" || backend == "redis-fair" || backend == "redlock") {
        t.short_lease.lease = 600ms;  // renewed every 200 ms while the holder runs
        t.kill_bound = 600ms;         // the lease
        t.stop_bound = 600ms;
    } else if (backend == "mysql") {
        t.short_lease.lease = 1000ms;  // the pinned session's wait_timeout (whole seconds)
        t.kill_bound = 300ms;          // the server ends a killed client's session when its socket closes
        t.stop_bound = 1000ms;         // wait_timeout
    } else if (backend == "zookeeper") {
        t.kill_bound = 1500ms;  // the session timeout
        t.stop_bound = 1500ms;
    }
    return t;
}

std::unique_ptr<LockService> open_backend(const std::string& backend, const std::string& prefix,
                                          LockServiceOptions options) {
    options.prefix = prefix;
    return open_lock_service(backend_url(backend), std::move(options));
}

void force_loss(const std::string& backend, LockService& holder, const std::string& prefix, const std::string& name) {
    if (backend == "memory") {
        dynamic_cast<InMemoryLockService&>(holder).expire(name);
    } else if (backend == "redis") {
        RedisClient redis(servers().redis_options());
        LockKeys keys(prefix, name);
        redis.del({keys.mutex(), keys.rw_writer(), keys.rw_readers(), keys.rw_reader_expiry()});
    } else if (backend == "redis-fair") {
        RedisClient redis(servers().redis_options());
        LockKeys keys(prefix, name);
        redis.del({keys.stem() + ":fair", keys.rw_writer(), keys.rw_readers(), keys.rw_reader_expiry()});
    } else if (backend == "redlock") {
        // The way a Redlock hold is lost: its key gone from the masters (expired, restarted empty).
        const std::string key = dynamic_cast<RedlockLockService&>(holder).lock_key(name);
        for (std::size_t i = 0; i < redlock_group().size(); ++i) RedisClient(redlock_group().redis_options(i)).del({key});
    } else if (backend == "mysql") {
        // The way a MySQL hold is lost: its session ends (KILL, server restart, wait_timeout).
        MysqlConnection admin(servers().mysql_options());
        const std::string server_name = dynamic_cast<MysqlLockService&>(holder).lock_name(name);
        auto row = admin.query_one("SELECT IS_USED_LOCK(?) AS id", {server_name});
        const auto id = row ? row->get<std::optional<std::int64_t>>("id") : std::nullopt;
        if (!id) throw ConfigError("name", "force_loss: nobody holds " + server_name);
        admin.execute_unprepared("KILL CONNECTION " + std::to_string(*id));
#ifdef LOCKSTEP_HAVE_ZOOKEEPER
    } else if (backend == "zookeeper") {
        (void)prefix;
        (void)name;
        dynamic_cast<ZooKeeperLockService&>(holder).expire_session();
#endif
    } else {
        throw ConfigError("backend", "force_loss: unknown backend " + backend);
    }
}

}  // namespace lockstep::test
