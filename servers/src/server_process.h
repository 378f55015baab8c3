// Internal: starting and stopping the private server processes. POSIX only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace lockstep::servers_detail {

// Finds `name` on PATH, then in /usr/sbin and /usr/local/sbin (Debian puts mariadbd there and
// ordinary users often lack it on PATH); a name with a slash is a path. Empty if not found.
std::string find_executable(const std::string& name);

// fork + exec `argv` in its own process group, stdout/stderr appended to `log_path`, stdin from
// /dev/null. The child writes its own pid to `pid_path` before exec, so the reaper can always
// find it even if we die the next instant.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log_path, const std::string& pid_path);

// SIGKILL the process group of `pid` and reap it. No-op for pid <= 0.
void kill_and_reap(pid_t pid);

// True if our child `pid` has exited (reaps it); `status` gets the wait status.
bool has_exited(pid_t pid, int* status = nullptr);

// Waits for `pid` to exit up to `timeout`; returns its exit code, or -1 on timeout (then kills it).
int wait_exit(pid_t pid, std::chrono::milliseconds timeout);

// A loopback TCP port that was free a moment ago.
int free_loopback_port();

// The last `lines` lines of a file, for error messages.
std::string tail_of(const std::string& path, int lines = 8);

}  // namespace lockstep::servers_detail
