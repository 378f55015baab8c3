// The child side of the C5 tests. When LOCKSTEP_INVALIDATION_CHILD is set, the static
// initializer below runs the named role and _exits before gtest's main starts. The child talks to
// the parent by lines on stdout.
#include <sys/prctl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "invalidation_test_support.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/core/uri.h"
#include "lockstep/strategies/fault_points.h"
#include "lockstep/strategies/outbox.h"
#include "lockstep/strategies/write_then_delete.h"

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

// Updates one product through the repository (WriteThenDelete), and stops for good right after
// COMMIT, before the DEL: the parent SIGKILLs it there (C5).
int writer_dies_after_commit_role() {
    RedisClient client(parse_redis_url(env("LOCKSTEP_INVALIDATION_REDIS")));
    MysqlPool pool(parse_mysql_url(env("LOCKSTEP_INVALIDATION_MYSQL")));
    RepositoryOptions o;
    o.key_prefix = env("PREFIX");
    o.strategy = std::make_shared<WriteThenDelete>();
    if (env("OUTBOX") == "1") o.outbox = std::make_shared<Outbox>(pool, make_redis_entry_store(client));
    CachedRepository<Item> repo(item_entity(), pool, client, o);
    auto armed = fault::arm(std::string(repo_points::after_commit), [] {
        say("committed");
        std::this_thread::sleep_for(60s);  // the parent kills us here
    });
    const std::int64_t id = std::stoll(env("ID"));
    const std::int64_t price = std::stoll(env("PRICE"));
    repo.update(id, [&](Item& p) { p.price = price; });
    say("error the update returned");
    return 1;
}

struct RunChildRole {
    RunChildRole() {
        const char* role = std::getenv("LOCKSTEP_INVALIDATION_CHILD");
        if (role == nullptr) return;
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test that started us
        int code = 2;
        try {
            if (std::string(role) == "writer_dies_after_commit") code = writer_dies_after_commit_role();
            else say(std::string("error unknown role ") + role);
        } catch (const std::exception& e) {
            say(std::string("error ") + e.what());
        }
        std::_Exit(code);
    }
};
const RunChildRole run_child_role;

}  // namespace
