// The node of O4's cases that runs in a process of its own (race_o4.h): the child's role, the
// parent's handle on it, and the SIGKILL / SIGSTOP trials that use them.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <stdexcept>
#include <thread>
#include <string>
#include <vector>

#include "lockstep/coordination/job_lock.h"
#include "lockstep/coordination/job_run_record.h"
#include "lockstep/core/error.h"
#include "lockstep/core/uri.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/db/transaction.h"
#include "lockstep/locks/lock_service.h"
#include "lockstep/servers/child_process.h"
#include "race_o4.h"
#include "stats.h"

namespace lockstep::demo {

namespace {

std::string setting(const char* name) {
    const char* v = std::getenv((std::string("LSO4_") + name).c_str());
    if (v == nullptr) throw std::runtime_error(std::string("__o4-holder: LSO4_") + name + " is not set");
    return v;
}

void say(const std::string& line) { std::cout << line << std::endl; }

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// The lease a holder process asks for ("" : the backend's own, ZooKeeper's session timeout).
std::string lease_of(const std::string& backend) {
    if (backend == "redis") return "600";   // renewed every 200 ms while the holder runs
    if (backend == "mysql") return "1000";  // the pinned session's wait_timeout (whole seconds); SIGKILL frees it at once
    return "";
}

// A node in this process tries the slot until it runs it (each try waits boundary_wait).
JobRun take_over(const O4Trial& s, JobLock& node, std::chrono::milliseconds bound) {
    const auto until = Clock::now() + bound;
    JobRun r;
    do {
        r = node.run_once([&](JobContext& run) { commit_run(s.db, run); });
        if (r.outcome != JobOutcome::Skipped) return r;
        std::this_thread::sleep_for(20ms);
    } while (Clock::now() < until);
    return r;
}

}  // namespace

void record_effect(Transaction& tx, const JobContext& run) {
    tx.execute("INSERT INTO demo_o4_effects (job, slot, token) VALUES (?, ?, ?)",
               {run.job(), run.slot().index, run.fence_token()});
}

int o4_holder_main() {
    try {
        LockServiceOptions so;
        so.prefix = setting("PREFIX");
        auto service = open_lock_service(setting("URL"), so);
        MysqlPool pool(parse_mysql_url(setting("MYSQL")));
        JobLockOptions o;
        o.boundary_wait = std::chrono::milliseconds(100);
        if (const auto lease = setting("LEASE_MS"); !lease.empty()) o.lock.lease = std::chrono::milliseconds(std::stoll(lease));
        o.run_record = &pool;
        const auto schedule = JobSchedule::every(std::chrono::milliseconds(std::stoll(setting("PERIOD_MS"))),
                                                 std::chrono::milliseconds(std::stoll(setting("OFFSET_MS"))));
        JobLock lock(*service, setting("JOB"), schedule, o);
        const bool record_first = setting("RECORD") == "first";
        const JobRun run = lock.run_once([&](JobContext& ctx) {
            const std::string running = "RUNNING " + std::to_string(ctx.slot().index) + " " + std::to_string(ctx.fence_token());
            std::string line;
            if (record_first) {
                Transaction tx(pool);
                ctx.record_run(tx);
                record_effect(tx, ctx);
                say(running);
                std::getline(std::cin, line);  // SIGKILLed while it waits here
                return;
            }
            say(running);
            if (!std::getline(std::cin, line) || line != "COMMIT") return;
            try {
                Transaction tx(pool);
                ctx.record_run(tx);
                record_effect(tx, ctx);
                tx.commit();
                say("COMMITTED");
            } catch (const ConflictError&) {
                say("REFUSED");
            }
        });
        if (run.outcome == JobOutcome::Skipped) say("SKIPPED " + run.skip_reason);
        return 0;
    } catch (const std::exception& e) {
        say(std::string("ERROR ") + e.what());
        return 1;
    }
}

namespace {

// The holder process of a trial, its settings in LSO4_* variables.
std::unique_ptr<testing::ChildProcess> start_holder(const std::map<std::string, std::string>& settings) {
    std::map<std::string, std::string> env;
    for (const auto& [k, v] : settings) env["LSO4_" + k] = v;
    return std::make_unique<testing::ChildProcess>(std::vector<std::string>{"lockstep-demo", "__o4-holder"}, env);
}

}  // namespace

Trial holder_process_trial(const O4Trial& s, bool kill) {
    auto b = s.open();
    const auto period = 5000ms;
    const auto [schedule, offset] = starting_now(*b, period);
    const auto holder = start_holder({{"URL", s.url},
                                      {"PREFIX", s.prefix},
                                      {"JOB", s.job},
                                      {"PERIOD_MS", std::to_string(period.count())},
                                      {"OFFSET_MS", std::to_string(offset)},
                                      {"MYSQL", s.mysql_url},
                                      {"LEASE_MS", lease_of(s.backend)},
                                      {"RECORD", kill ? "first" : "last"}});
    const auto running = holder->read_line(20s);
    if (!running || running->rfind("RUNNING ", 0) != 0) {
        throw std::runtime_error("the holder process did not run the job: " + running.value_or("no answer"));
    }
    const std::int64_t slot = std::stoll(running->substr(8));
    const std::int64_t token = std::stoll(running->substr(running->rfind(' ') + 1));
    JobLockOptions o;
    o.boundary_wait = 100ms;
    o.run_record = &s.db;
    JobLock node(*b, s.job, schedule, o);
    const auto signalled = Clock::now();
    holder->signal(kill ? SIGKILL : SIGSTOP);
    if (kill) holder->wait();
    const JobRun r = take_over(s, node, 4000ms);
    const double took = ms_since(signalled);
    std::string late = "killed";
    if (!kill) {
        holder->signal(SIGCONT);
        holder->send("COMMIT");
        late = holder->read_line(20s).value_or("no answer");
    }
    if (r.outcome != JobOutcome::Ran) {
        throw std::runtime_error("the next node did not run the slot within 4 s: " + std::string(to_string(r.outcome)) + " " +
                                 r.skip_reason);
    }
    const auto effects = s.effects();
    Trial t;
    t.reproduced = effects != 1 || late == "COMMITTED";
    std::string lease = "lease " + lease_of(s.backend) + " ms";
    if (s.backend == "zookeeper") lease = "session timeout " + std::to_string(kO4ZooKeeperSessionMs) + " ms";
    if (s.backend == "mysql") lease = kill ? "GET_LOCK ends with the killed session" : "wait_timeout 1 s";
    t.evidence = std::string("the next node ran slot ") + std::to_string(r.slot.index) +
                 (r.slot.index == slot ? " (the holder's)" : " (NOT the holder's)") + " " + fixed1(took) + " ms after " +
                 (kill ? "SIGKILL" : "SIGSTOP") + " (" + lease + "), token " + std::to_string(r.token) + " > " +
                 std::to_string(token) + "; ";
    if (!kill) t.evidence += "the SIGCONTed holder's late commit: " + late + "; ";
    t.evidence += "the slot's effect committed " + std::to_string(effects) + "x";
    t.metrics = {{"took_over_after_ms", took}, {"effects", static_cast<double>(effects)}};
    if (!kill && late != "REFUSED" && late != "COMMITTED") throw std::runtime_error("the resumed holder said: " + late);
    return t;
}

}  // namespace lockstep::demo
