#include "backends.h"

#include <cstdlib>

#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"
#include "lockstep/locks/in_memory_lock_service.h"
#include "lockstep/locks/lock_keys.h"
#include "test_servers.h"

namespace lockstep::test {

using namespace std::chrono_literals;

std::string backend_url(const std::string& backend) {
    // A child process gets its parent's URL (it must not start servers of its own).
    if (const char* url = std::getenv("LOCKSTEP_CT_URL"); url && *url) return url;
    if (backend == "memory") return "memory:";
    if (backend == "redis") return servers().redis_url();
    return "";
}

BackendTraits backend_traits(const std::string& backend) {
    BackendTraits t;
    t.name = backend;
    if (backend == "memory") {
        t.cross_process = false;
    } else if (backend == "redis") {
        t.short_lease.lease = 600ms;  // renewed every 200 ms while the holder runs
        t.kill_bound = 600ms;         // the lease
        t.stop_bound = 600ms;
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
    } else {
        throw ConfigError("backend", "force_loss: unknown backend " + backend);
    }
}

}  // namespace lockstep::test
