#include "redis_options_check.h"

#include "lockstep/core/error.h"

namespace lockstep::detail {

void check_redis_options(const RedisOptions& o) {
    if (o.host.empty()) throw ConfigError("host", "must not be empty");
    if (o.port < 1 || o.port > 65535)
        throw ConfigError("port", "must be in 1..65535, got " + std::to_string(o.port));
    if (o.db < 0) throw ConfigError("database", "must not be negative, got " + std::to_string(o.db));
    // A cluster node refuses SELECT n > 0: every connection would fail and a command would wait
    // out failover_wait for a "no master serves slot" (parse_redis_url refuses it too).
    if (o.topology == RedisTopology::Cluster && o.db != 0)
        throw ConfigError("database", "Redis Cluster has only database 0, got " + std::to_string(o.db));
    // SO_RCVTIMEO / SO_SNDTIMEO of zero mean "no timeout": a hang, which lockstep never allows.
    if (o.connect_timeout.count() <= 0) throw ConfigError("connect_timeout", "must be positive");
    if (o.socket_timeout.count() <= 0) throw ConfigError("socket_timeout", "must be positive");
    if (o.pool_size == 0) throw ConfigError("pool_size", "must be at least 1");
    if (o.pool_wait_timeout.count() < 0) throw ConfigError("pool_wait_timeout", "must not be negative");
    if (o.pool_check_idle_after.count() < 0) throw ConfigError("pool_check_idle_after", "must not be negative");
    if (o.tls.enabled && o.tls.cert_file.empty() != o.tls.key_file.empty())
        throw ConfigError(o.tls.cert_file.empty() ? "tls_cert" : "tls_key",
                          "a client certificate needs both tls_cert and tls_key");
}

}  // namespace lockstep::detail
