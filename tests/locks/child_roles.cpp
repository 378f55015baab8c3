// The child side of the multi-process lock tests. When LOCKSTEP_LOCKS_CHILD is set, the static
// initializer below runs the named role and _exits before gtest's main ever starts.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "locks_test_support.h"
#include "lockstep/core/uri.h"
#include "lockstep/db/fenced_write.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/locks/redis_mutex.h"
#include "lockstep/locks/redis_read_write_lock.h"

namespace lockstep::test {

int run_locked_increments(RedisClient& redis, RedisLockClient& locks, const std::string& name,
                          const std::string& key, int threads, int total) {
    std::atomic<int> errors{0};
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
        const int mine = total / threads + (t < total % threads ? 1 : 0);
        workers.emplace_back([&, mine] {
            RedisMutex m(locks, name);
            for (int i = 0; i < mine; ++i) {
                try {
                    std::scoped_lock hold(m);
                    auto v = redis.get(key);
                    long long n = v ? std::stoll(*v) : 0;
                    std::this_thread::yield();  // widen the read-modify-write window
                    redis.set(key, std::to_string(n + 1));
                } catch (const std::exception& e) {
                    std::cerr << "increment failed: " << e.what() << "\n";
                    errors.fetch_add(1);
                }
            }
        });
    }
    for (auto& w : workers) w.join();
    return errors.load();
}

}  // namespace lockstep::test

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

std::string next_command() {
    std::string line;
    if (!std::getline(std::cin, line)) return "EOF";
    return line;
}

int counter_role() {
    RedisClient redis([] {
        auto o = parse_redis_url(env("LOCKSTEP_LOCKS_REDIS"));
        o.pool_size = 16;
        return o;
    }());
    LockClientOptions lo;
    lo.prefix = env("PREFIX");
    RedisLockClient locks(redis, lo);
    say("READY");
    if (next_command() != "GO") return 2;
    int errors = test::run_locked_increments(redis, locks, env("NAME"), env("KEY"),
                                             std::stoi(env("THREADS", "8")), std::stoi(env("COUNT")));
    say("DONE " + std::to_string(errors));
    return 0;
}

// Holds one lock (mutex, read or write side), then obeys the parent.
int hold_role() {
    RedisClient redis(parse_redis_url(env("LOCKSTEP_LOCKS_REDIS")));
    LockClientOptions lo;
    lo.prefix = env("PREFIX");
    RedisLockClient locks(redis, lo);
    const std::string mode = env("MODE", "mutex");
    const std::chrono::milliseconds lease(std::stoll(env("LEASE_MS", "30000")));
    const bool renew = env("RENEW", "1") == "1";
    const long long hold_ms = std::stoll(env("HOLD_MS", "-1"));

    RedisMutex mutex(locks, env("NAME"), {.lease = lease, .renew = renew});
    RedisReadWriteLock rw(locks, env("NAME"), {.lease = lease, .renew = renew});
    FenceToken token = 0;
    if (mode == "mutex") {
        mutex.lock();
        token = mutex.fence_token();
    } else if (mode == "write") {
        rw.lock();
        token = rw.fence_token();
    } else {
        rw.lock_shared();
    }
    say("HELD " + std::to_string(token));
    auto is_lost = [&] { return mode == "mutex" ? mutex.lost() : rw.lost(); };
    auto unlock = [&] {
        say(std::string("LOST ") + (is_lost() ? "1" : "0"));
        try {
            if (mode == "mutex")
                mutex.unlock_checked();
            else if (mode == "write")
                rw.unlock_checked();
            else
                rw.unlock_shared_checked();
            say("UNLOCKED");
        } catch (const LockLostError& e) {
            say(std::string("UNLOCK_FAILED LockLostError ") + e.what());
        } catch (const std::exception& e) {
            say(std::string("UNLOCK_FAILED other ") + e.what());
        }
    };
    if (hold_ms >= 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
        unlock();
        return 0;
    }
    for (;;) {
        std::string cmd = next_command();
        if (cmd == "UNLOCK" || cmd == "EOF") {
            unlock();
            return 0;
        }
        if (cmd.rfind("WRITE ", 0) == 0) {
            // WRITE <product id> <name>: a fenced write under this hold's token.
            std::istringstream in(cmd.substr(6));
            long long id = 0;
            std::string value;
            in >> id >> value;
            try {
                MysqlPool pool(parse_mysql_url(env("LOCKSTEP_LOCKS_MYSQL")));
                bool applied = fenced_update(pool, id, token, {.assignments = "name = ?", .params = {value}, .table = "products"});
                say(applied ? "WRITE OK" : "WRITE MISSING");
            } catch (const ConflictError& e) {
                say(std::string("WRITE REFUSED ") + e.what());
            } catch (const std::exception& e) {
                say(std::string("WRITE ERROR ") + e.what());
            }
        }
    }
}

int run_child(const std::string& role) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
    try {
        if (role == "counter") return counter_role();
        if (role == "hold") return hold_role();
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
