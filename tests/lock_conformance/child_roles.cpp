// The child side of the conformance suite's multi-process tests. When LOCKSTEP_CONFORMANCE_CHILD
// is set, the static initializer below runs the named role and _exits before gtest's main.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends.h"
#include "child_role.h"
#include "counter_file.h"
#include "lockstep/core/uri.h"
#include "lockstep/db/fenced_write.h"
#include "lockstep/db/mysql_pool.h"
#ifdef LOCKSTEP_HAVE_ZOOKEEPER
#include "lockstep/servers/local_zookeeper.h"
#endif

namespace {

using namespace lockstep;
using namespace std::chrono_literals;

using lockstep::test::child::env;
using lockstep::test::child::say;

std::string next_command() {
    std::string line;
    if (!std::getline(std::cin, line)) return "EOF";
    return line;
}

std::unique_ptr<LockService> open_service(LockServiceOptions o = {}) {
    o.prefix = env("PREFIX");
    return open_lock_service(env("LOCKSTEP_CT_URL"), std::move(o));
}

// THREADS threads x PER_THREAD unguarded file increments, each inside the mutex NAME.
int count_role() {
    auto service = open_service();
    const int threads = std::stoi(env("THREADS"));
    const int per_thread = std::stoi(env("PER_THREAD"));
    say("READY");
    if (next_command() != "GO") return 2;
    const int errors = test::locked_increments(*service, env("NAME"), env("FILE"), threads, per_thread);
    say("DONE " + std::to_string(errors));
    return 0;
}

// Holds NAME (lease LEASE_MS) and answers commands about the hold.
int hold_role() {
    auto service = open_service();
    LockOptions o;
    o.lease = std::chrono::milliseconds(std::stoll(env("LEASE_MS")));
    o.on_lost = [](const LockLoss&) { say("LOST"); };
    auto m = service->make_mutex(env("NAME"), o);
    m->lock();
    say("HELD " + std::to_string(m->fence_token()));
    for (;;) {
        const std::string cmd = next_command();
        if (cmd == "EOF") return 0;
        if (cmd.rfind("FENCE ", 0) == 0) {
            // The late write of a holder that was stopped past its lease (L5).
            try {
                MysqlPool pool(parse_mysql_url(env("MYSQL_URL")));
                auto conn = pool.acquire();
                FencedUpdate u{.assignments = "v = ?", .params = {std::stoll(cmd.substr(6))}, .table = "ct_fenced"};
                fenced_update(*conn, 1, m->fence_token(), u);
                say("FENCE applied");
            } catch (const ConflictError&) {
                say("FENCE refused");
            } catch (const std::exception& e) {
                say(std::string("FENCE error ") + e.what());
            }
        } else if (cmd == "LOST?") {
            say(std::string("LOST? ") + (m->lost() ? "1" : "0"));
        } else if (cmd == "UNLOCK") {
            try {
                m->unlock_checked();
                say("UNLOCK ok");
            } catch (const LockLostError&) {
                say("UNLOCK lost");
            } catch (const std::exception& e) {
                say(std::string("UNLOCK error ") + e.what());
            }
        }
    }
}

#ifdef LOCKSTEP_HAVE_ZOOKEEPER
// Starts a private ZooKeeper and waits to be killed (the reaper test).
int zk_owner_role() {
    LocalZooKeeper zk;
    say("ZK " + std::to_string(zk.pid()));
    next_command();
    return 0;
}
#endif

struct RunChildRole {
    RunChildRole() {
        const std::string role = env("LOCKSTEP_CONFORMANCE_CHILD");
        if (role.empty()) return;
        int rc = 3;
        try {
            if (role == "count") rc = count_role();
            if (role == "hold") rc = hold_role();
#ifdef LOCKSTEP_HAVE_ZOOKEEPER
            if (role == "zk-owner") rc = zk_owner_role();
#endif
        } catch (const std::exception& e) {
            say(std::string("ERROR ") + e.what());
            rc = 4;
        }
        std::cout.flush();
        ::_exit(rc);
    }
} run_child_role;

}  // namespace
