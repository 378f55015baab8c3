#include "locks_test_support.h"

#include "lockstep/core/uri.h"
#include "test_servers.h"

namespace lockstep::test {

std::unique_ptr<RedisClient> make_redis() {
    RedisOptions o = servers().redis_options();
    o.pool_size = 16;
    return std::make_unique<RedisClient>(o);
}

LockProcess::LockProcess(const std::string& prefix, LockClientOptions options) : redis(make_redis()) {
    options.prefix = prefix;
    locks = std::make_unique<RedisLockClient>(*redis, std::move(options));
}

namespace {

std::map<std::string, std::string> child_env(const std::string& role,
                                             const std::map<std::string, std::string>& env) {
    std::map<std::string, std::string> all = {{"LOCKSTEP_LOCKS_CHILD", role},
                                              {"LOCKSTEP_LOCKS_REDIS", servers().redis_url()},
                                              {"LOCKSTEP_LOCKS_MYSQL", servers().mysql_url()}};
    for (const auto& [name, value] : env) all[name] = value;
    return all;
}

}  // namespace

Child::Child(const std::string& role, const std::map<std::string, std::string>& env)
    : ChildProcess({"locks-child"}, child_env(role, env)) {}

}  // namespace lockstep::test
