#include "workers.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <thread>

#include "context.h"
#include "lockstep/core/error.h"

extern char** environ;

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

void write_all(int fd, const std::string& data) {
    std::size_t done = 0;
    while (done < data.size()) {
        ssize_t n = ::write(fd, data.data() + done, data.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw std::runtime_error(std::string("write to worker process failed: ") + std::strerror(errno));
        done += static_cast<std::size_t>(n);
    }
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
    pid_t pid = -1;
    int in = -1;   // its stdin (we write jobs)
    int out = -1;  // its stdout (we read results)
    std::string buffer;
    bool alive = false;
    int status = 0;

    ~Process() { end(true); }

    void start(const std::string& init) {
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
        std::string sub = "__worker";
        char* argv[] = {name.data(), sub.data(), nullptr};
        int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, environ);
        posix_spawn_file_actions_destroy(&actions);
        ::close(in_pipe[0]);
        ::close(out_pipe[1]);
        in = in_pipe[1];
        out = out_pipe[0];
        if (rc != 0) {
            ::close(in);
            ::close(out);
            in = out = -1;
            throw std::runtime_error(std::string("posix_spawn failed: ") + std::strerror(rc));
        }
        alive = true;
        buffer.clear();
        send(init);
    }

    void send(const std::string& line) { write_all(in, line + "\n"); }

    // The next line, or nullopt at EOF (the process ended) or after `deadline`.
    std::optional<std::string> read_line(std::chrono::steady_clock::time_point deadline) {
        for (;;) {
            auto nl = buffer.find('\n');
            if (nl != std::string::npos) {
                std::string line = buffer.substr(0, nl);
                buffer.erase(0, nl + 1);
                return line;
            }
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) return std::nullopt;
            pollfd p{out, POLLIN, 0};
            int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
            if (n < 0 && errno != EINTR) return std::nullopt;
            if (n <= 0) continue;
            char buf[8192];
            ssize_t got = ::read(out, buf, sizeof buf);
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) return std::nullopt;
            buffer.append(buf, static_cast<std::size_t>(got));
        }
    }

    // Ends the process: closes its stdin (it exits on EOF) and reaps it; kills it if `kill` or
    // if it does not exit within a few seconds.
    void end(bool kill) {
        if (!alive && pid <= 0) return;
        if (in >= 0) ::close(in);
        in = -1;
        if (pid > 0) {
            if (kill) {
                ::kill(pid, SIGKILL);
            } else {
                for (int i = 0; i < 500; ++i) {
                    if (::waitpid(pid, &status, WNOHANG) == pid) {
                        pid = -1;
                        break;
                    }
                    std::this_thread::sleep_for(std::chrono::milliseconds(10));
                }
                if (pid > 0) ::kill(pid, SIGKILL);
            }
            if (pid > 0) {
                ::kill(pid, SIGCONT);  // a stopped process must run to die
                while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
                }
            }
        }
        pid = -1;
        if (out >= 0) ::close(out);
        out = -1;
        alive = false;
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
        if (!proc.alive) proc.start(init.dump());
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
            if (!timed_out && WIFEXITED(proc.status) && WEXITSTATUS(proc.status) == kCrashExit) {
                nlohmann::json results = nlohmann::json::array();
                for (const auto& w : jobs[p]["workers"]) {
                    results.push_back({{"index", w["index"]}, {"result", {{"crashed", true}}}});
                }
                replies[p] = {{"results", results}};
                return;
            }
            failures[p] = timed_out ? "did not answer in time and was killed"
                          : WIFSIGNALED(proc.status)
                              ? "was killed by signal " + std::to_string(WTERMSIG(proc.status))
                              : "exited with status " + std::to_string(WEXITSTATUS(proc.status));
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
