#include "test_servers.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>

#include "lockstep/core/error.h"

namespace lockstep::test {

namespace {

// LOCKSTEP_TEST_REDIS_TOPOLOGY: "standalone" for unset/"", "cluster", "tls", "tls-cluster" (a
// cluster whose nodes serve TLS, reached by a rediss+cluster:// URL) or "sentinel".
std::string requested_topology() {
    const char* v = std::getenv("LOCKSTEP_TEST_REDIS_TOPOLOGY");
    const std::string topology = v ? v : "";
    if (topology.empty() || topology == "standalone") return "standalone";
    if (topology == "cluster" || topology == "tls" || topology == "tls-cluster" || topology == "sentinel") {
        return topology;
    }
    throw ConfigError("LOCKSTEP_TEST_REDIS_TOPOLOGY",
                      "'" + topology + "' is not a test topology (standalone, cluster, tls, tls-cluster or sentinel)");
}

bool cluster_requested() {
    return requested_topology() == "cluster" || requested_topology() == "tls-cluster";
}

// LOCKSTEP_TEST_MYSQL_TLS: "1" for a TLS-only private MariaDB; unset, "" or "0" for plain.
bool mysql_tls_requested() {
    const char* v = std::getenv("LOCKSTEP_TEST_MYSQL_TLS");
    const std::string value = v ? v : "";
    if (value.empty() || value == "0") return false;
    if (value == "1") return true;
    throw ConfigError("LOCKSTEP_TEST_MYSQL_TLS", "'" + value + "' is neither 1 (TLS) nor 0 (plain)");
}

bool external_mysql() {
    const char* v = std::getenv("LOCKSTEP_MYSQL_URL");
    return v && *v;
}

bool external_redis() {
    const char* v = std::getenv("LOCKSTEP_REDIS_URL");
    return v && *v;
}

void require_single_redis(const TestServers& s, const char* what) {
    if (s.redis_is_cluster()) {
        throw ConfigError("TestServers", std::string("cannot ") + what + " the Redis: it is a cluster");
    }
    if (s.redis_is_sentinel()) {
        throw ConfigError("TestServers", std::string("cannot ") + what + " the Redis: it is behind Sentinel");
    }
}

}  // namespace

TestServers::TestServers() {
    LocalServersOptions o;
    if (cluster_requested() && !external_redis()) {
        LocalRedisClusterOptions co;
        co.masters = 3;
        co.replicas_per_master = 0;
        co.tls = requested_topology() == "tls-cluster";
        cluster_ = std::make_unique<LocalRedisCluster>(co);
        o.redis = false;
    }
    if (requested_topology() == "sentinel" && !external_redis()) {
        sentinel_ = std::make_unique<LocalRedisSentinel>();
        o.redis = false;
    }
    // A private TLS-only redis-server; an external Redis (LOCKSTEP_REDIS_URL) wins, as above.
    if (requested_topology() == "tls" && !external_redis()) o.redis_tls = true;
    // A private TLS-only MariaDB; an external MySQL (LOCKSTEP_MYSQL_URL) wins.
    if (mysql_tls_requested() && !external_mysql()) o.mysql_tls = true;
    local_ = std::make_unique<LocalServers>(o);
}

TestServers::~TestServers() = default;

std::string TestServers::redis_url() const {
    if (cluster_) return cluster_->url();
    return sentinel_ ? sentinel_->url() : local_->redis_url();
}

RedisOptions TestServers::redis_options() const {
    if (cluster_) return cluster_->redis_options();
    return sentinel_ ? sentinel_->redis_options() : local_->redis_options();
}

std::string TestServers::mysql_url() const { return local_->mysql_url(); }
MysqlOptions TestServers::mysql_options() const { return local_->mysql_options(); }

// A private cluster or Sentinel setup answers for itself: the LocalServers beside it then has no
// Redis, and asking it for its options would throw.
bool TestServers::redis_is_cluster() const {
    if (cluster_ || sentinel_) return cluster_ != nullptr;
    return local_->redis_options().topology == RedisTopology::Cluster;
}

bool TestServers::redis_is_sentinel() const {
    if (cluster_ || sentinel_) return sentinel_ != nullptr;
    return local_->redis_options().topology == RedisTopology::Sentinel;
}

bool TestServers::owns_redis() const noexcept { return !cluster_ && !sentinel_ && local_->owns_redis(); }
bool TestServers::owns_mysql() const noexcept { return local_->owns_mysql(); }

void TestServers::kill_redis() {
    require_single_redis(*this, "kill");
    local_->kill_redis();
}
void TestServers::start_redis() {
    require_single_redis(*this, "start");
    local_->start_redis();
}
void TestServers::restart_redis() {
    require_single_redis(*this, "restart");
    local_->restart_redis();
}
int TestServers::redis_pid() const noexcept { return cluster_ || sentinel_ ? 0 : local_->redis_pid(); }

void TestServers::kill_mysql() { local_->kill_mysql(); }
void TestServers::start_mysql() { local_->start_mysql(); }
void TestServers::restart_mysql() { local_->restart_mysql(); }
int TestServers::mysql_pid() const noexcept { return local_->mysql_pid(); }

TestServers& servers() {
    // Function-local static: started by the first test that needs it, destroyed at exit.
    static TestServers instance;
    return instance;
}

std::string unique_prefix() {
    static std::atomic<int> counter{0};
    return "{t" + std::to_string(::getpid()) + "_" + std::to_string(counter.fetch_add(1)) + "}:";
}

std::string unique_lock_prefix() {
    static std::atomic<int> counter{0};
    return "t" + std::to_string(::getpid()) + "_" + std::to_string(counter.fetch_add(1)) + ":";
}

}  // namespace lockstep::test
