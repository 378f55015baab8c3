// The child processes of the adversarial suite. When LOCKSTEP_LOCKS_CHILD is set, the static
// initializer below runs the named role and _exits before gtest's main starts.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <random>
#include <sstream>
#include <string>

#include "adversary.h"
#include "lockstep/core/uri.h"
#include "lockstep/db/fenced_write.h"
#include "lockstep/locks/redis_lock_service.h"
#include "lockstep/locks/redis_mutex.h"
#include "lockstep/strategies/cached_repository.h"
#include "lockstep/strategies/write_then_delete.h"

namespace {

using namespace lockstep;
using namespace std::chrono_literals;

std::string env(const char* name, const char* fallback = "") {
    const char* v = std::getenv(name);
    return v ? v : fallback;
}

void say(const std::string& line) {
    std::string l = line + "\n";
    (void)!::write(STDOUT_FILENO, l.data(), l.size());
}

// Holds RedisMutex NAME (lease LEASE_MS, renewed), prints "HELD <token>", then obeys:
// "WRITE <id> <value>" -> a fenced write into adv_fenced under its token; "UNLOCK" -> unlock()
// (never throws) and "LOST 0|1".
int fenced_holder() {
    RedisClient redis(parse_redis_url(env("LOCKSTEP_LOCKS_REDIS")));
    LockClientOptions lo;
    lo.prefix = env("PREFIX");
    RedisLockClient locks(redis, lo);
    RedisLockService lock_service(locks);
    MysqlPool pool(parse_mysql_url(env("LOCKSTEP_LOCKS_MYSQL")));
    RedisMutex m(locks, env("NAME"), {.lease = std::chrono::milliseconds(std::stoll(env("LEASE_MS", "600")))});
    m.lock();
    const FenceToken token = m.fence_token();
    say("HELD " + std::to_string(token));
    std::string line;
    while (std::getline(std::cin, line)) {
        if (line.rfind("WRITE ", 0) == 0) {
            std::istringstream in(line.substr(6));
            long long id = 0;
            std::string value;
            in >> id >> value;
            FencedUpdate u;
            u.assignments = "name = ?";
            u.params = {value};
            u.table = "adv_fenced";
            try {
                say(fenced_update(pool, id, token, u) ? "WRITE OK" : "WRITE MISSING");
            } catch (const ConflictError& e) {
                say(std::string("WRITE REFUSED ") + e.what());
            } catch (const std::exception& e) {
                say(std::string("WRITE ERROR ") + e.what());
            }
        } else if (line == "UNLOCK") {
            const bool lost = m.lost();
            m.unlock();
            say(std::string("LOST ") + (lost ? "1" : "0"));
            return 0;
        }
    }
    return 0;
}

// Updates random adv_items rows through a CachedRepository (WriteThenDelete, ReadWrite locks)
// for ever, until it is killed.
int repo_writer() {
    RedisOptions ro = parse_redis_url(env("LOCKSTEP_LOCKS_REDIS"));
    ro.pool_size = 4;
    RedisClient redis(ro);
    LockClientOptions lo;
    lo.prefix = env("PREFIX");
    RedisLockClient locks(redis, lo);
    RedisLockService lock_service(locks);
    MysqlPool pool(parse_mysql_url(env("LOCKSTEP_LOCKS_MYSQL")));
    RepositoryOptions o;
    o.strategy = std::make_shared<WriteThenDelete>();
    o.lock_mode = LockMode::ReadWrite;
    o.lock_service = &lock_service;
    o.lock_lease = std::chrono::milliseconds(std::stoll(env("LEASE_MS", "900")));
    o.lock_wait = 3s;
    o.key_prefix = env("PREFIX");
    o.ttl = std::chrono::milliseconds(std::stoll(env("TTL_MS", "2000")));
    o.ttl_jitter = 0ms;
    CachedRepository<adversary::Item> repo(adversary::item_entity(), pool, redis, o);
    const int rows = std::stoi(env("ROWS", "5"));
    std::mt19937 rng(static_cast<unsigned>(::getpid()));
    say("READY");
    for (long n = 0;; ++n) {
        const std::int64_t id = 1 + static_cast<std::int64_t>(rng() % static_cast<unsigned>(rows));
        try {
            repo.update(id, [&](adversary::Item& i) { i.name = std::to_string(::getpid()) + "-" + std::to_string(n); });
        } catch (const std::exception&) {
            // Timeouts behind a killed holder are expected; the parent checks the cache.
        }
    }
}

int run_child(const std::string& role) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
    try {
        if (role == "fenced_holder") return fenced_holder();
        if (role == "repo_writer") return repo_writer();
        say("UNKNOWN ROLE " + role);
        return 3;
    } catch (const std::exception& e) {
        say(std::string("ERROR ") + e.what());
        return 4;
    }
}

[[maybe_unused]] const bool kChildRoleHandled = [] {
    const char* role = std::getenv("LOCKSTEP_LOCKS_CHILD");
    if (role == nullptr) return false;
    int code = run_child(role);
    std::_Exit(code);
}();

}  // namespace
