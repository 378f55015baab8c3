// The child side of the multi-process tests. When LOCKSTEP_STRATEGIES_CHILD is set, the static
// initializer below runs the named role and _exits before gtest's main starts. A child talks to
// the parent by lines on stdout, and reaches the servers through the URLs in its environment
// (it never starts servers of its own).
#include <sys/prctl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/core/uri.h"
#include "strategies_test_support.h"

namespace {

using namespace lockstep;
using namespace lockstep::test;
using namespace std::chrono_literals;

std::string env(const char* name, const char* fallback = "") {
    const char* v = std::getenv(name);
    return v ? v : fallback;
}

void say(const std::string& line) {
    std::string l = line + "\n";
    (void)!::write(STDOUT_FILENO, l.data(), l.size());
}

// Many threads of this process read one key that is not cached, all at once, after the parent
// says go (a Redis key appears). Prints the loads this process made and how many reads got the
// expected price.
int stampede_role() {
    const int threads = std::stoi(env("THREADS", "16"));
    const std::int64_t id = std::stoll(env("ID"));
    const std::int64_t price = std::stoll(env("PRICE"));
    RedisOptions ro = parse_redis_url(env("LOCKSTEP_STRATEGIES_REDIS"));
    ro.pool_size = static_cast<std::size_t>(threads) + 4;
    MysqlOptions mo = parse_mysql_url(env("LOCKSTEP_STRATEGIES_MYSQL"));
    mo.pool_size = static_cast<std::size_t>(threads) + 2;
    RedisClient client(ro);
    MysqlPool pool(mo);
    LockClientOptions lo;
    lo.prefix = env("PREFIX");
    RedisLockClient lock_client(client, lo);
    RedisLockService lock_service(lock_client);

    RepositoryOptions o;
    o.key_prefix = env("PREFIX");
    o.strategy = strategy_named(env("STRATEGY", "WriteThenDelete"));
    o.lock_mode = lock_mode_named(env("LOCK", "None"));
    o.lock_service = &lock_service;
    o.guard_wait = 10s;
    o.lock_wait = 10s;
    CachedRepository<Product> repo(product_entity(), pool, client, o);

    // A slow database read, so that every reader arrives while the one loader is loading.
    auto slow = fault::arm(std::string(repo_points::after_db_read), fault::pause(300ms));

    std::atomic<bool> go{false};
    std::atomic<int> ok{0}, failed{0};
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&] {
            while (!go.load()) std::this_thread::sleep_for(100us);
            try {
                auto p = repo.get(id);
                (p && p->price == price ? ok : failed).fetch_add(1);
            } catch (const std::exception& e) {
                say(std::string("error ") + e.what());
                failed.fetch_add(1);
            }
        });
    }
    say("ready");
    const std::string go_key = env("GO_KEY");
    auto deadline = std::chrono::steady_clock::now() + 30s;
    while (!client.get(go_key)) {
        if (std::chrono::steady_clock::now() > deadline) {
            go = true;
            for (auto& w : workers) w.join();
            say("error no go");
            return 2;
        }
        std::this_thread::sleep_for(200us);
    }
    go = true;
    for (auto& w : workers) w.join();
    auto m = repo.metrics();
    say("result loads=" + std::to_string(m.loads) + " ok=" + std::to_string(ok.load()) + " failed=" +
        std::to_string(failed.load()) + " guard_waits=" + std::to_string(m.guard_waits) +
        " guard_timeouts=" + std::to_string(m.guard_timeouts));
    return 0;
}

struct RunChildRole {
    RunChildRole() {
        const char* role = std::getenv("LOCKSTEP_STRATEGIES_CHILD");
        if (role == nullptr) return;
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test that started us
        int code = 3;
        try {
            if (std::string(role) == "stampede") code = stampede_role();
            else say(std::string("error unknown role ") + role);
        } catch (const std::exception& e) {
            say(std::string("error ") + e.what());
            code = 4;
        }
        std::fflush(stdout);
        ::_exit(code);
    }
};

const RunChildRole run_child_role;

}  // namespace
