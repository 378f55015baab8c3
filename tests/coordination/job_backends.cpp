#include "job_backends.h"

#include "lockstep/servers/local_redis_group.h"
#include "test_servers.h"
#ifdef LOCKSTEP_HAVE_ZOOKEEPER
#include "lockstep/servers/local_zookeeper.h"
#endif

namespace lockstep::test {

using namespace std::chrono_literals;

namespace {

LocalRedisGroup& redlock_group() {
    static LocalRedisGroup instance{LocalRedisGroupOptions{}};
    return instance;
}

#ifdef LOCKSTEP_HAVE_ZOOKEEPER
LocalZooKeeper& zookeeper() {
    static LocalZooKeeper instance{LocalZooKeeperOptions{}};
    return instance;
}
#endif

}  // namespace

std::vector<std::string> job_backends() { return {"memory", "redis", "redis-fair", "mysql", "zookeeper", "redlock"}; }

std::string job_backend_url(const std::string& backend) {
    if (const char* url = std::getenv("LOCKSTEP_JOB_URL"); url && *url) return url;  // a child: its parent's
    if (backend == "memory") return "memory:";
    if (backend == "redis") return servers().redis_url();
    if (backend == "redis-fair") return "redis-fair" + servers().redis_url().substr(5);
    if (backend == "mysql") return servers().mysql_url();
    if (backend == "redlock") return redlock_group().redlock_url() + "?connect_timeout=1s&socket_timeout=1s";
#ifdef LOCKSTEP_HAVE_ZOOKEEPER
    if (backend == "zookeeper") return zookeeper().url() + "?session_timeout_ms=1500";
#endif
    return "";
}

std::unique_ptr<LockService> open_job_backend(const std::string& backend, const std::string& prefix) {
    LockServiceOptions o;
    o.prefix = prefix;
    return open_lock_service(job_backend_url(backend), std::move(o));
}

bool cross_process(const std::string& backend) { return backend != "memory"; }

std::chrono::milliseconds kill_bound(const std::string& backend) {
    if (backend == "mysql") return 300ms;       // the server ends a killed client's session at once
    if (backend == "zookeeper") return 1500ms;  // the session timeout
    return kTestLease;
}

}  // namespace lockstep::test
