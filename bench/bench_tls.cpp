// TLS benchmark rows: what TLS costs per cache hit, per lock cycle and per point SELECT. One
// private redis-server listens on a TLS port and a plain port (the same process, memory and
// data), one private mariadbd accepts TLS and plain connections; each row times the same call
// over TLS and in plain text, call by call in one paired loop (paired.h). Connections are pooled
// and kept, so the handshake is paid once per connection and never inside the timed calls: what
// is left is encrypting, decrypting and the TLS record framing of each request and reply.
// Informational: TLS is a deployment's choice, not a cost lockstep could remove.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "families.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/locks/lock_client.h"
#include "lockstep/locks/redis_mutex.h"
#include "lockstep/servers/local_servers.h"
#include "paired.h"

namespace lockstep::bench {

namespace {

constexpr const char* kTlsRedisBench = "tls_vs_plain/paired_redis";
constexpr const char* kTlsCycleBench = "tls_vs_plain/paired_cycle";
constexpr const char* kTlsSelectBench = "tls_vs_plain/paired_select";

// A loopback port free now (the kernel's pick for port 0), for the server's plain port.
int free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw ConnectionError("socket() failed");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        ::close(fd);
        throw ConnectionError("no free loopback port");
    }
    ::close(fd);
    return ntohs(addr.sin_port);
}

// The servers and clients of the rows, alive as long as the benchmarks.
struct TlsBench {
    std::unique_ptr<LocalServers> redis_server;  // TLS port + plain port
    std::unique_ptr<LocalServers> mysql_server;  // TLS and plain
    std::unique_ptr<RedisClient> tls_redis, plain_redis;
    std::unique_ptr<RedisLockClient> tls_locks, plain_locks;
    std::unique_ptr<RedisMutex> tls_mutex, plain_mutex;
    std::unique_ptr<MysqlPool> tls_db, plain_db;
};

}  // namespace

void register_tls(Environment& env, Plan& plan) {
    const Budget& b = env.budget();
    auto t = std::make_shared<TlsBench>();
    const int plain_port = free_port();
    LocalServersOptions ro;
    ro.mysql = false;
    ro.redis_tls = true;
    ro.redis_tls_auth_clients = "no";
    ro.redis_extra_args = {"--port", std::to_string(plain_port)};  // after the TLS-only "--port 0"
    t->redis_server = std::make_unique<LocalServers>(ro);
    const RedisOptions tls_options = t->redis_server->redis_options();
    RedisOptions plain_options = tls_options;
    plain_options.tls = {};
    plain_options.port = plain_port;
    t->tls_redis = std::make_unique<RedisClient>(tls_options);
    t->plain_redis = std::make_unique<RedisClient>(plain_options);
    LockClientOptions lo;
    lo.prefix = env.prefix();
    t->tls_locks = std::make_unique<RedisLockClient>(*t->tls_redis, lo);
    t->plain_locks = std::make_unique<RedisLockClient>(*t->plain_redis, lo);
    t->tls_mutex = std::make_unique<RedisMutex>(*t->tls_locks, "bench-tls-cycle");
    t->plain_mutex = std::make_unique<RedisMutex>(*t->plain_locks, "bench-plain-cycle");

    const TlsCertificates& certs = t->redis_server->redis_tls_certificates();
    LocalServersOptions mo;
    mo.redis = false;
    mo.use_environment = false;  // the same server over both: always a private one
    mo.mysql_tls_cert = certs.server_cert;
    mo.mysql_tls_key = certs.server_key;
    mo.mysql_tls_ca = certs.ca_file;
    t->mysql_server = std::make_unique<LocalServers>(mo);
    const MysqlOptions plain_db = t->mysql_server->mysql_options();
    MysqlOptions tls_db = plain_db;
    tls_db.tls.mode = MysqlTlsMode::VerifyIdentity;
    tls_db.tls.ca_file = certs.ca_file;
    t->plain_db = std::make_unique<MysqlPool>(plain_db);
    t->tls_db = std::make_unique<MysqlPool>(tls_db);
    t->plain_db->execute("CREATE TABLE IF NOT EXISTS tls_bench (id BIGINT PRIMARY KEY, body VARCHAR(1000) NOT NULL)");
    t->plain_db->execute("REPLACE INTO tls_bench VALUES (1, ?)", {std::string(500, 'b')});

    // About 1 KB, like a cached row with its envelope.
    const std::string key = env.prefix() + "{bench-tls-hit}:entry";
    t->tls_redis->set(key, std::string(1000, 'v'));

    register_paired(kTlsRedisBench, b, [t, key] {
        return std::vector<TimedOp>{
            {"tls_hit", [t, key] { benchmark::DoNotOptimize(t->tls_redis->get(key)); }},
            {"plain_hit", [t, key] { benchmark::DoNotOptimize(t->plain_redis->get(key)); }},
        };
    });
    register_paired(kTlsCycleBench, b, [t] {
        return std::vector<TimedOp>{
            {"tls_cycle",
             [t] {
                 t->tls_mutex->lock();
                 t->tls_mutex->unlock();
             }},
            {"plain_cycle",
             [t] {
                 t->plain_mutex->lock();
                 t->plain_mutex->unlock();
             }},
        };
    });
    register_paired(kTlsSelectBench, b, [t] {
        constexpr const char* kSelect = "SELECT body FROM tls_bench WHERE id = ?";
        return std::vector<TimedOp>{
            {"tls_select", [t] { benchmark::DoNotOptimize(t->tls_db->query_one(kSelect, {std::int64_t{1}})); }},
            {"plain_select", [t] { benchmark::DoNotOptimize(t->plain_db->query_one(kSelect, {std::int64_t{1}})); }},
        };
    });

    plan.add(row_order::kTlsHit, "TLS: cache hit, rediss:// ÷ redis://", "— (informational)", {kTlsRedisBench},
             [](const Results& r) {
                 const MedianRepetition m(r, kTlsRedisBench, "tls_hit", "plain_hit");
                 TableRow row = paired_latency_row(m, "tls_hit", "plain_hit", 0, "RedisClient::get (rediss://)",
                                                   "RedisClient::get (redis://, same server)");
                 row.verdict = Verdict::Shown;
                 row.notes = "1 KB entry, one redis-server with a TLS and a plain port; TLS adds " +
                             micros(m.seconds("tls_hit") - m.seconds("plain_hit")) + " per hit";
                 return row;
             });
    plan.add(row_order::kTlsCycle, "TLS: lock cycle, rediss:// ÷ redis://", "— (informational)", {kTlsCycleBench},
             [](const Results& r) {
                 const MedianRepetition m(r, kTlsCycleBench, "tls_cycle", "plain_cycle");
                 TableRow row = paired_latency_row(m, "tls_cycle", "plain_cycle", 0, "RedisMutex lock+unlock (rediss://)",
                                                   "RedisMutex lock+unlock (redis://, same server)");
                 row.verdict = Verdict::Shown;
                 row.notes = "two round trips per cycle; TLS adds " +
                             micros(m.seconds("tls_cycle") - m.seconds("plain_cycle")) + " per cycle";
                 return row;
             });
    plan.add(row_order::kTlsSelect, "TLS: point SELECT, MySQL tls=verify_identity ÷ plain", "— (informational)",
             {kTlsSelectBench}, [](const Results& r) {
                 const MedianRepetition m(r, kTlsSelectBench, "tls_select", "plain_select");
                 TableRow row = paired_latency_row(m, "tls_select", "plain_select", 0,
                                                   "MysqlPool::query_one by primary key (TLS)",
                                                   "the same (plain, same server)");
                 row.verdict = Verdict::Shown;
                 row.notes = "500-byte row, pooled prepared statement; TLS adds " +
                             micros(m.seconds("tls_select") - m.seconds("plain_select")) + " per SELECT";
                 return row;
             });
}

}  // namespace lockstep::bench
