// SameCpu: for the length of a paired loop, this process's threads and a private server's threads
// run on the CPU the calling thread is on; every thread gets its own CPU set back after.
//
// Why (measured on the 2-core VM, docs/performance.md): a server with one thread per
// connection (mariadbd, and ZooKeeper's and libzookeeper's own threads) serves ours and the floor
// on different threads, and the kernel placed those threads differently: two connections opened
// the same way, sending the same statements, differed 2.3-2.65x in 7 of 8 unpinned runs (which
// one was slow changed between runs). So an unpinned row compared the wake-up cost of an idle
// vCPU per connection, not two code paths. On one CPU both sides see the same placement: the
// same two connections measured 1.00x. Redis serves every connection on one thread, so its rows
// do not need this. A row using it says so, and keeps a control pair (the floor twice) in its
// notes so a reader can see what the measurement cannot tell apart.
//
// Best effort: a pid that is gone, or a CPU set the kernel refuses, leaves that thread as it was.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <utility>
#include <vector>

namespace lockstep::bench {

class SameCpu {
public:
    // `server_pids`: private servers to pin with this process (0 = none, e.g. an external server).
    explicit SameCpu(const std::vector<int>& server_pids);
    ~SameCpu();
    SameCpu(const SameCpu&) = delete;
    SameCpu& operator=(const SameCpu&) = delete;

    // The CPU everything runs on, or -1 when nothing could be pinned.
    int cpu() const noexcept { return cpu_; }

private:
    int cpu_ = -1;
    std::vector<std::pair<pid_t, cpu_set_t>> restore_;     // thread id -> its CPU set before
    std::vector<std::pair<pid_t, cpu_set_t>> processes_;   // pid -> its first thread's set before
};

}  // namespace lockstep::bench
