#include "handover_worker.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "lockstep/core/error.h"
#include "lockstep/core/uri.h"

extern char** environ;

namespace lockstep::bench {

using Clock = std::chrono::steady_clock;

std::int64_t to_ns(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

Clock::time_point from_ns(std::int64_t ns) {
    return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(ns)));
}

WorkerProcess spawn_handover_worker(const RedisOptions& redis, const std::string& prefix, const std::string& lock,
                                    int threads, Clock::time_point start, Clock::time_point end) {
    int fds[2];
    if (::pipe(fds) != 0) throw Error(std::string("pipe: ") + std::strerror(errno));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    posix_spawn_file_actions_addclose(&actions, fds[1]);
    std::vector<std::string> args = {"lockstep-bench",           "--handover-worker",         prefix, lock,
                                     std::to_string(threads),    std::to_string(to_ns(start)), std::to_string(to_ns(end))};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
        if (std::strncmp(*e, kWorkerUrlVariable, std::strlen(kWorkerUrlVariable)) != 0) env_strings.emplace_back(*e);
    }
    env_strings.push_back(std::string(kWorkerUrlVariable) + "=" + to_url(redis));
    std::vector<char*> envp;
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    WorkerProcess worker;
    const int rc = posix_spawn(&worker.pid, "/proc/self/exe", &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    if (rc != 0) {
        ::close(fds[0]);
        throw Error(std::string("posix_spawn /proc/self/exe: ") + std::strerror(rc));
    }
    worker.out = fds[0];
    return worker;
}

std::string finish_handover_worker(const WorkerProcess& worker) {
    std::string out;
    char buf[256];
    for (;;) {
        const ssize_t n = ::read(worker.out, buf, sizeof buf);
        if (n > 0) {
            out.append(buf, static_cast<std::size_t>(n));
        } else if (n == 0 || errno != EINTR) {
            break;
        }
    }
    ::close(worker.out);
    int status = 0;
    while (::waitpid(worker.pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        throw Error("handover worker process failed (status " + std::to_string(status) + "): " + out);
    }
    return out;
}

}  // namespace lockstep::bench
