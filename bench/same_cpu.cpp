#include "same_cpu.h"

#include <dirent.h>

#include <cstdlib>
#include <string>

#include <unistd.h>

namespace lockstep::bench {

namespace {

// Every thread of process `pid` (its /proc/<pid>/task entries).
std::vector<pid_t> threads_of(pid_t pid) {
    std::vector<pid_t> tids;
    const std::string dir = "/proc/" + std::to_string(pid) + "/task";
    DIR* d = opendir(dir.c_str());
    if (!d) return tids;
    while (const dirent* e = readdir(d)) {
        const long tid = std::strtol(e->d_name, nullptr, 10);
        if (tid > 0) tids.push_back(static_cast<pid_t>(tid));
    }
    closedir(d);
    return tids;
}

}  // namespace

SameCpu::SameCpu(const std::vector<int>& server_pids) {
    const int cpu = sched_getcpu();
    if (cpu < 0) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    std::vector<pid_t> pids{getpid()};
    for (int p : server_pids)
        if (p > 0) pids.push_back(p);
    // A server starts a thread per new connection from its listener thread, which is pinned here
    // too, so connections opened during the loop inherit the CPU.
    for (pid_t pid : pids) {
        cpu_set_t main_thread;
        if (sched_getaffinity(pid, sizeof(main_thread), &main_thread) == 0) processes_.emplace_back(pid, main_thread);
        for (pid_t tid : threads_of(pid)) {
            cpu_set_t before;
            if (sched_getaffinity(tid, sizeof(before), &before) != 0) continue;
            if (sched_setaffinity(tid, sizeof(one), &one) != 0) continue;
            restore_.emplace_back(tid, before);
        }
    }
    if (!restore_.empty()) cpu_ = cpu;
}

SameCpu::~SameCpu() {
    for (const auto& [tid, before] : restore_) sched_setaffinity(tid, sizeof(before), &before);
    // Threads started during the loop inherited the one CPU: they get their process's first
    // thread's set (what they would have inherited unpinned).
    for (const auto& [pid, before] : processes_) {
        for (pid_t tid : threads_of(pid)) {
            bool known = false;
            for (const auto& r : restore_) known = known || r.first == tid;
            if (!known) sched_setaffinity(tid, sizeof(before), &before);
        }
    }
}

}  // namespace lockstep::bench
