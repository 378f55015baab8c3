// Workers: the actors of a scenario. A worker is a named role (a function registered by its
// scenario) run with some JSON arguments. run_workers runs a list of them either as threads of
// the demo process (sharing its Services) or, with --processes N, spread over N worker
// processes: the demo binary re-executed with the hidden sub-command `__worker`, each with its
// own pools and lock client (WorkerPool). Jobs go to a child as JSON lines on its stdin, its
// results come back as one JSON line per job on its stdout.
//
// Roles coordinate through Services::signals() (Redis), which works the same across threads
// and processes, and arm fault points through ThreadFaults (thread_faults.h), which acts only
// in the thread that asked.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "services.h"

namespace lockstep::demo {

class DemoContext;

// A worker process that exits with this status crashed on purpose (e.g. between SETNX and
// EXPIRE); its workers' results are {"crashed": true}.
inline constexpr int kCrashExit = 86;

struct Worker {
    Services& services;
    // Position in the run_workers list, and its length.
    int index = 0;
    int count = 1;
    const nlohmann::json& args;
    std::uint64_t seed = 0;
    // True when this worker runs alone in a worker process of its own: it may then crash it
    // (crash()) or stop it (SIGSTOP) without harming other workers.
    bool alone_in_process = false;

    // Ends the worker as a crash would: in a process of its own, _exit(kCrashExit) at once;
    // in a thread, throws WorkerCrashed, which the runner reports as {"crashed": true}.
    [[noreturn]] void crash() const;
};

struct WorkerCrashed {};

using RoleFn = std::function<nlohmann::json(Worker&)>;

struct WorkerSpec {
    std::string role;
    nlohmann::json args = nlohmann::json::object();
};

// Registered roles, by name ("oversell.buyer"). Filled before main parses anything.
std::map<std::string, RoleFn>& roles();

// Runs every spec at once and returns their results in order. Throws when a worker threw
// (its message) or a worker process failed.
std::vector<nlohmann::json> run_workers(DemoContext& ctx, const std::vector<WorkerSpec>& specs);

// The worker processes of a demo run (--processes N). They are started on first use and kept
// for the whole run, like the long-lived application servers they stand for: each keeps its
// Services (pools, lock client) from one job to the next. A process that crashed on purpose
// (kCrashExit) is replaced by a new one for the next job. Destroying the pool ends them all.
class WorkerPool {
public:
    WorkerPool(Endpoints endpoints, std::string prefix, int concurrency);
    ~WorkerPool();
    WorkerPool(const WorkerPool&) = delete;
    WorkerPool& operator=(const WorkerPool&) = delete;

    // Sends job p to process p (p < jobs.size()) and returns each one's reply.
    std::vector<nlohmann::json> run(const std::vector<nlohmann::json>& jobs);

    struct Process;

private:
    Endpoints endpoints_;
    std::string prefix_;
    int concurrency_;
    std::vector<std::unique_ptr<Process>> processes_;
};

// The `__worker` sub-command: reads one init line, then jobs, one per line, from stdin and
// answers each with one line of results on stdout, until stdin closes.
int worker_main();

}  // namespace lockstep::demo
