#include "workers.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <exception>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <thread>

#include "context.h"
#include "lockstep/core/error.h"
#include "lockstep/servers/child_process.h"

namespace lockstep::demo {

namespace {

// A worker process whose result does not arrive within this time is killed and reported.
constexpr auto kProcessDeadline = std::chrono::minutes(10);

nlohmann::json run_one(Worker& w, const std::string& role) {
    auto it = roles().find(role);
    if (it == roles().end()) throw ConfigError("role", "no worker role named '" + role + "'");
    try {
        return it->second(w);
    } catch (const WorkerCrashed&) {
        return {{"crashed", true}};
    }
}

// Runs `items` (spec index -> spec) as threads on `services`; returns index -> result or error.
struct Item {
    int index;
    std::string role;
    nlohmann::json args;
};

nlohmann::json run_threads(Services& services, const std::vector<Item>& items, int count, std::uint64_t seed,
                           bool alone) {
    std::vector<nlohmann::json> out(items.size());
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < items.size(); ++i) {
        threads.emplace_back([&, i] {
            const Item& item = items[i];
            Worker w{services, item.index, count, item.args, seed, alone};
            try {
                out[i] = {{"index", item.index}, {"result", run_one(w, item.role)}};
            } catch (const std::exception& e) {
                out[i] = {{"index", item.index}, {"error", item.role + ": " + e.what()}};
            }
        });
    }
    for (auto& t : threads) t.join();
    return out;
}

}  // namespace

void Worker::crash() const {
    if (alone_in_process) {
        std::fflush(nullptr);
        ::_exit(kCrashExit);
    }
    throw WorkerCrashed{};
}

std::map<std::string, RoleFn>& roles() {
    static std::map<std::string, RoleFn> all;
    return all;
}

// ---- worker processes ----------------------------------------------------------------------

struct WorkerPool::Process {
    std::unique_ptr<testing::ChildProcess> child;  // null: not started, or ended
    int status = 0;  // how the last one ended: its exit code, or 128 + the signal that ended it

    bool alive() const { return child != nullptr; }

    void start(const std::string& init) {
        child = std::make_unique<testing::ChildProcess>(std::vector<std::string>{"lockstep-demo", "__worker"});
        send(init);
    }

    void send(const std::string& line) { child->send(line); }

    // The next line, or nullopt at EOF (the process ended) or after `deadline`.
    std::optional<std::string> read_line(std::chrono::steady_clock::time_point deadline) {
        return child->read_line(
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()));
    }

    // Ends the process: closes its stdin (it exits on EOF) and reaps it; kills it if `kill` or
    // if it does not exit within a few seconds.
    void end(bool kill) {
        if (!child) return;
        child->close_stdin();
        if (kill || !child->wait_for(std::chrono::seconds(5))) child->signal(SIGKILL);
        child->signal(SIGCONT);  // a stopped process must run to die
        status = child->wait();
        child.reset();
    }
};

WorkerPool::WorkerPool(Endpoints endpoints, std::string prefix, int concurrency)
    : endpoints_(std::move(endpoints)), prefix_(std::move(prefix)), concurrency_(concurrency) {}

WorkerPool::~WorkerPool() {
    for (auto& p : processes_) p->end(false);
}

std::vector<nlohmann::json> WorkerPool::run(const std::vector<nlohmann::json>& jobs) {
    const nlohmann::json init = {{"redis_url", endpoints_.redis_url},
                                 {"mysql_url", endpoints_.mysql_url},
                                 {"prefix", prefix_},
                                 {"concurrency", concurrency_},
                                 {"parent", static_cast<long long>(::getpid())}};
    while (processes_.size() < jobs.size()) processes_.push_back(std::make_unique<Process>());
    for (std::size_t p = 0; p < jobs.size(); ++p) {
        auto& proc = *processes_[p];
        if (!proc.alive()) proc.start(init.dump());
        proc.send(jobs[p].dump());
    }
    const auto deadline = std::chrono::steady_clock::now() + kProcessDeadline;
    std::vector<nlohmann::json> replies(jobs.size());
    std::vector<std::string> failures(jobs.size());
    std::vector<std::thread> readers;
    for (std::size_t p = 0; p < jobs.size(); ++p) {
        readers.emplace_back([&, p] {
            auto& proc = *processes_[p];
            auto line = proc.read_line(deadline);
            if (line) {
                try {
                    replies[p] = nlohmann::json::parse(*line);
                    return;
                } catch (const std::exception& e) {
                    failures[p] = std::string("unreadable reply: ") + e.what();
                    proc.end(true);
                    return;
                }
            }
            // EOF (the process ended) or the deadline passed (it hangs): either way it is done.
            const bool timed_out = std::chrono::steady_clock::now() >= deadline;
            proc.end(timed_out);
            if (!timed_out && proc.status == kCrashExit) {
                nlohmann::json results = nlohmann::json::array();
                for (const auto& w : jobs[p]["workers"]) {
                    results.push_back({{"index", w["index"]}, {"result", {{"crashed", true}}}});
                }
                replies[p] = {{"results", results}};
                return;
            }
            failures[p] = timed_out ? "did not answer in time and was killed"
                          : proc.status > 128 ? "was killed by signal " + std::to_string(proc.status - 128)
                                              : "exited with status " + std::to_string(proc.status);
        });
    }
    for (auto& r : readers) r.join();
    std::string errors;
    for (std::size_t p = 0; p < jobs.size(); ++p) {
        if (!failures[p].empty()) errors += (errors.empty() ? "" : "; ") + ("worker process " + std::to_string(p) + " " + failures[p]);
    }
    if (!errors.empty()) throw std::runtime_error(errors);
    return replies;
}

std::vector<nlohmann::json> run_workers(DemoContext& ctx, const std::vector<WorkerSpec>& specs) {
    const int count = static_cast<int>(specs.size());
    const auto& o = ctx.options();
    nlohmann::json raw = nlohmann::json::array();
    if (o.processes <= 0) {
        std::vector<Item> items;
        for (int i = 0; i < count; ++i) items.push_back({i, specs[i].role, specs[i].args});
        raw = run_threads(ctx.services(), items, count, o.seed, false);
    } else {
        const int nproc = std::min(o.processes, count);
        std::vector<int> per(nproc, 0);
        for (int i = 0; i < count; ++i) ++per[i % nproc];
        std::vector<nlohmann::json> jobs(nproc);
        for (int p = 0; p < nproc; ++p) {
            jobs[p] = {{"seed", o.seed}, {"count", count}, {"alone", per[p] == 1}, {"workers", nlohmann::json::array()}};
        }
        for (int i = 0; i < count; ++i) {
            jobs[i % nproc]["workers"].push_back({{"index", i}, {"role", specs[i].role}, {"args", specs[i].args}});
        }
        for (auto& reply : ctx.worker_pool().run(jobs)) {
            for (auto& r : reply["results"]) raw.push_back(std::move(r));
        }
    }
    std::vector<nlohmann::json> out(count);
    std::string errors;
    for (const auto& r : raw) {
        int i = r["index"].get<int>();
        if (r.contains("error")) {
            if (!errors.empty()) errors += "; ";
            errors += r["error"].get<std::string>();
        } else {
            out[i] = r["result"];
        }
    }
    if (!errors.empty()) throw std::runtime_error(errors);
    return out;
}

int worker_main() {
    // Die with the demo: a worker must never outlive the run that started it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    std::string line;
    if (!std::getline(std::cin, line)) return 2;
    nlohmann::json init;
    try {
        init = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
        std::cerr << "lockstep-demo __worker: bad init line: " << e.what() << "\n";
        return 2;
    }
    if (::getppid() != static_cast<pid_t>(init["parent"].get<long long>())) return 3;
    std::unique_ptr<Services> services;
    while (std::getline(std::cin, line)) {
        nlohmann::json job = nlohmann::json::parse(line);
        nlohmann::json results = nlohmann::json::array();
        try {
            if (!services) {
                services = std::make_unique<Services>(
                    Endpoints{init["redis_url"].get<std::string>(), init["mysql_url"].get<std::string>()},
                    init["prefix"].get<std::string>(), init["concurrency"].get<int>());
            }
            std::vector<Item> items;
            for (const auto& w : job["workers"]) {
                items.push_back({w["index"].get<int>(), w["role"].get<std::string>(), w["args"]});
            }
            results = run_threads(*services, items, job["count"].get<int>(), job["seed"].get<std::uint64_t>(),
                                  job["alone"].get<bool>());
        } catch (const std::exception& e) {
            results = nlohmann::json::array();
            for (const auto& w : job["workers"]) {
                results.push_back({{"index", w["index"]}, {"error", std::string("worker process: ") + e.what()}});
            }
        }
        std::cout << nlohmann::json{{"results", results}}.dump() << std::endl;
    }
    return 0;
}

}  // namespace lockstep::demo
