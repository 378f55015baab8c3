// The node of O4's cases that runs in a process of its own (race_o4.h): the child's role, the
// parent's handle on it, and the SIGKILL / SIGSTOP trials that use them.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
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
#include "race_o4.h"
#include "stats.h"

extern char** environ;

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

HolderProcess::HolderProcess(const std::map<std::string, std::string>& settings) {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
    for (const auto& [k, v] : settings) env.push_back("LSO4_" + k + "=" + v);
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    int in_pipe[2];
    int out_pipe[2];
    if (::pipe2(in_pipe, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
        ::close(in_pipe[0]);
        ::close(in_pipe[1]);
        throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
    std::string exe = "/proc/self/exe";
    std::string name = "lockstep-demo";
    std::string sub = "__o4-holder";
    char* argv[] = {name.data(), sub.data(), nullptr};
    const int rc = posix_spawn(&pid_, exe.c_str(), &actions, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(in_pipe[0]);
    ::close(out_pipe[1]);
    to_child_ = in_pipe[1];
    from_child_ = out_pipe[0];
    if (rc != 0) {
        ::close(to_child_);
        ::close(from_child_);
        pid_ = -1;
        throw std::runtime_error(std::string("posix_spawn failed: ") + std::strerror(rc));
    }
}

HolderProcess::~HolderProcess() {
    if (to_child_ >= 0) ::close(to_child_);
    if (pid_ > 0) {
        ::kill(pid_, SIGCONT);
        ::kill(pid_, SIGKILL);
        reap();
    }
    if (from_child_ >= 0) ::close(from_child_);
}

std::optional<std::string> HolderProcess::next_line(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        const auto nl = buffer_.find('\n');
        if (nl != std::string::npos) {
            std::string line = buffer_.substr(0, nl);
            buffer_.erase(0, nl + 1);
            return line;
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return std::nullopt;
        pollfd p{from_child_, POLLIN, 0};
        const int n = ::poll(&p, 1, static_cast<int>(left.count()));
        if (n < 0 && errno != EINTR) return std::nullopt;
        if (n <= 0) continue;
        char buf[4096];
        const ssize_t got = ::read(from_child_, buf, sizeof buf);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return std::nullopt;
        buffer_.append(buf, static_cast<std::size_t>(got));
    }
}

void HolderProcess::send(const std::string& line) {
    const std::string data = line + "\n";
    std::size_t done = 0;
    while (done < data.size()) {
        const ssize_t n = ::write(to_child_, data.data() + done, data.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw std::runtime_error("the holder process's stdin is closed");
        done += static_cast<std::size_t>(n);
    }
}

void HolderProcess::signal(int sig) {
    if (pid_ > 0) ::kill(pid_, sig);
}

void HolderProcess::reap() {
    if (pid_ <= 0) return;
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
}

Trial holder_process_trial(const O4Trial& s, bool kill) {
    auto b = s.open();
    const auto period = 5000ms;
    const auto [schedule, offset] = starting_now(*b, period);
    HolderProcess holder({{"URL", s.url},
                          {"PREFIX", s.prefix},
                          {"JOB", s.job},
                          {"PERIOD_MS", std::to_string(period.count())},
                          {"OFFSET_MS", std::to_string(offset)},
                          {"MYSQL", s.mysql_url},
                          {"LEASE_MS", lease_of(s.backend)},
                          {"RECORD", kill ? "first" : "last"}});
    const auto running = holder.next_line(20s);
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
    holder.signal(kill ? SIGKILL : SIGSTOP);
    if (kill) holder.reap();
    const JobRun r = take_over(s, node, 4000ms);
    const double took = ms_since(signalled);
    std::string late = "killed";
    if (!kill) {
        holder.signal(SIGCONT);
        holder.send("COMMIT");
        late = holder.next_line(20s).value_or("no answer");
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
