// ChildProcess: a process started from an executable (by default this one, /proc/self/exe,
// re-executed in a role its argv or environment names) that the parent talks to in lines: it
// writes to the child's stdin and reads the child's stdout (stderr is shared with the parent).
// Tests, the demo and the benchmarks use it to put a lock holder, a leader or a worker in a
// process of its own, so that a real SIGKILL or SIGSTOP can end or freeze it:
//
//   lockstep::testing::ChildProcess holder({"my-test", "--role", "holder"}, {{"URL", url}});
//   if (!holder.expect("HELD", std::chrono::seconds(20))) FAIL() << "no HELD";
//   holder.signal(SIGKILL);
//   int status = holder.wait();  // 128 + SIGKILL
//
// Nothing blocks without a bound except wait() (which a caller uses after a kill or once the
// child said it is done): reads return nullopt on timeout and on EOF, and writing to a child
// that has closed its stdin throws lockstep::Error instead of raising SIGPIPE. The destructor
// SIGKILLs the child (SIGCONT too, in case it is stopped) unless it was reaped, and reaps it.
// POSIX only (posix_spawnp; the pipes are close-on-exec, so no other child inherits them).
//
// Thread safety: one ChildProcess is used by one thread at a time; separate ChildProcess objects
// may be used from different threads at once.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::testing {

class ChildProcess {
public:
    // Starts `executable` with `argv` (argv[0] included) and this process's environment, with
    // each of `env` set (replacing a variable of the same name). An `executable` without a '/'
    // ("java", "redis-server") is looked up on PATH. Throws lockstep::Error when the pipes or the
    // process cannot be created (or no such executable exists).
    explicit ChildProcess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {},
                          const std::string& executable = "/proc/self/exe");
    ~ChildProcess();
    ChildProcess(const ChildProcess&) = delete;
    ChildProcess& operator=(const ChildProcess&) = delete;

    // The child's next line of stdout (without the newline), waiting up to `timeout`; nullopt on
    // timeout or when the child closed its stdout (exited) first.
    std::optional<std::string> read_line(std::chrono::milliseconds timeout);
    // Reads lines until one starts with `prefix` and returns it (lines before it are dropped);
    // nullopt when none did within `timeout` or the child closed its stdout.
    std::optional<std::string> expect(const std::string& prefix, std::chrono::milliseconds timeout);
    // Everything the child writes until it closes its stdout (usually: exits); nullopt when it
    // has not closed it within `timeout`.
    std::optional<std::string> read_to_end(std::chrono::milliseconds timeout);

    // Writes `line` and a newline to the child's stdin. Throws lockstep::Error when the child no
    // longer reads it (it exited or closed its stdin).
    void send(const std::string& line);
    // Closes the child's stdin: a child reading lines until EOF then ends on its own.
    void close_stdin();

    // Sends `sig` (SIGKILL, SIGSTOP, SIGCONT, ...); does nothing once the child was reaped.
    void signal(int sig);
    // Waits for the child to exit and reaps it: its exit code, or 128 + the signal that ended it.
    // Returns the same again when called after it was reaped.
    int wait();
    // As wait(), but gives up after `timeout` (nullopt; the child is left running).
    std::optional<int> wait_for(std::chrono::milliseconds timeout);

    pid_t pid() const { return pid_; }

private:
    bool fill_buffer(std::chrono::steady_clock::time_point deadline);
    int exit_code() const;

    pid_t pid_ = -1;
    int to_child_ = -1;    // the write end of the child's stdin
    int from_child_ = -1;  // the read end of the child's stdout
    std::string buffer_;   // read from the child, not yet returned
    bool eof_ = false;     // the child closed its stdout
    bool reaped_ = false;
    int status_ = 0;  // the wait status, once reaped_
};

}  // namespace lockstep::testing
