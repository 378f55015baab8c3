#include "lock_backends.h"

#include <stdexcept>

#include "lockstep/servers/local_redis_group.h"
#ifdef LOCKSTEP_HAVE_ZOOKEEPER
#include "lockstep/servers/local_zookeeper.h"
#endif

namespace lockstep::demo {

namespace {

#ifdef LOCKSTEP_HAVE_ZOOKEEPER
LocalZooKeeper& zookeeper() {
    static LocalZooKeeper instance{LocalZooKeeperOptions{}};
    return instance;
}
#endif

LocalRedisGroup& redlock_group() {
    static LocalRedisGroup instance{LocalRedisGroupOptions{}};
    return instance;
}

}  // namespace

std::vector<std::string> demo_lock_backends(bool with_redlock) {
    std::vector<std::string> v{"redis", "redis-fair", "mysql"};
#ifdef LOCKSTEP_HAVE_ZOOKEEPER
    v.push_back("zookeeper");
#endif
    if (with_redlock) v.push_back("redlock");
    return v;
}

std::string demo_lock_url(Services& services, const std::string& backend, int zookeeper_session_ms) {
    const std::string& redis = services.endpoints().redis_url;
    if (backend == "redis") return redis;
    if (backend == "redis-fair" && redis.rfind("redis://", 0) == 0) return "redis-fair" + redis.substr(5);
    if (backend == "mysql") return services.endpoints().mysql_url;
    if (backend == "redlock") return redlock_group().redlock_url();
#ifdef LOCKSTEP_HAVE_ZOOKEEPER
    if (backend == "zookeeper") return zookeeper().url() + "?session_timeout_ms=" + std::to_string(zookeeper_session_ms);
#endif
    throw std::invalid_argument("the demo has no lock backend '" + backend + "' here");
}

std::unique_ptr<LockService> open_demo_lock(Services& services, const std::string& backend, const std::string& prefix) {
    LockServiceOptions o;
    o.prefix = prefix;
    return open_lock_service(demo_lock_url(services, backend), std::move(o));
}

}  // namespace lockstep::demo
