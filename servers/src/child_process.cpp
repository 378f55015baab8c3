#include "lockstep/servers/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "lockstep/core/error.h"

extern char** environ;

namespace lockstep::testing {

namespace {

using Clock = std::chrono::steady_clock;

std::string errno_text(const std::string& what, int err) { return what + ": " + std::strerror(err); }

void close_fd(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                           const std::string& executable) {
    if (argv.empty()) throw ConfigError("argv", "a child process needs at least argv[0]");
    // stdin is a socket, not a pipe, so that send() can use MSG_NOSIGNAL: writing to a child that
    // is gone is an EPIPE error, never a SIGPIPE that would end this process.
    int in[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0) throw Error(errno_text("socketpair", errno));
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) {
        const int err = errno;
        ::close(in[0]);
        ::close(in[1]);
        throw Error(errno_text("pipe", err));
    }
    ::shutdown(in[0], SHUT_WR);  // the child's stdin only reads

    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
        const char* eq = std::strchr(*e, '=');
        const std::string name = eq == nullptr ? std::string(*e) : std::string(*e, static_cast<std::size_t>(eq - *e));
        if (env.count(name) == 0) env_strings.emplace_back(*e);
    }
    for (const auto& [name, value] : env) env_strings.push_back(name + "=" + value);
    std::vector<char*> envp;
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = argv;
    std::vector<char*> argp;
    for (auto& a : args) argp.push_back(a.data());
    argp.push_back(nullptr);

    // dup2 onto 0 and 1 clears close-on-exec there; every other copy closes at exec.
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    // posix_spawnp: a name with a '/' is used as it is, one without is looked up on PATH.
    const int rc = ::posix_spawnp(&pid_, executable.c_str(), &actions, nullptr, argp.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(in[0]);
    ::close(out[1]);
    to_child_ = in[1];
    from_child_ = out[0];
    if (rc != 0) {
        close_fd(to_child_);
        close_fd(from_child_);
        pid_ = -1;
        reaped_ = true;
        throw Error(errno_text("posix_spawn " + executable, rc));
    }
}

ChildProcess::~ChildProcess() {
    close_fd(to_child_);
    if (!reaped_) {
        ::kill(pid_, SIGKILL);
        ::kill(pid_, SIGCONT);  // a stopped process must run to die
        wait();
    }
    close_fd(from_child_);
}

// Reads what the child has written into buffer_, waiting until `deadline`; false on timeout or EOF.
bool ChildProcess::fill_buffer(Clock::time_point deadline) {
    if (from_child_ < 0 || eof_) return false;
    for (;;) {
        const auto now = Clock::now();
        if (now >= deadline) return false;
        // Rounded up: a timeout never ends early.
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
        pollfd p{from_child_, POLLIN, 0};
        const int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
        if (n < 0 && errno != EINTR) return false;
        if (n <= 0) continue;
        char buf[4096];
        const ssize_t got = ::read(from_child_, buf, sizeof buf);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            eof_ = true;
            return false;
        }
        buffer_.append(buf, static_cast<std::size_t>(got));
        return true;
    }
}

std::optional<std::string> ChildProcess::read_line(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
        const auto nl = buffer_.find('\n');
        if (nl != std::string::npos) {
            std::string line = buffer_.substr(0, nl);
            buffer_.erase(0, nl + 1);
            return line;
        }
        if (!fill_buffer(deadline)) return std::nullopt;
    }
}

std::optional<std::string> ChildProcess::expect(const std::string& prefix, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
        auto line = read_line(std::max(left, std::chrono::milliseconds(0)));
        if (!line) return std::nullopt;
        if (line->rfind(prefix, 0) == 0) return line;
    }
}

std::optional<std::string> ChildProcess::read_to_end(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (fill_buffer(deadline)) {
    }
    if (!eof_) return std::nullopt;
    std::string all = std::move(buffer_);
    buffer_.clear();
    return all;
}

void ChildProcess::send(const std::string& line) {
    const std::string data = line + "\n";
    std::size_t done = 0;
    while (done < data.size()) {
        if (to_child_ < 0) throw Error("the child process's stdin is closed");
        const ssize_t n = ::send(to_child_, data.data() + done, data.size() - done, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw Error(errno_text("writing to the child process " + std::to_string(pid_), errno));
        done += static_cast<std::size_t>(n);
    }
}

void ChildProcess::close_stdin() { close_fd(to_child_); }

void ChildProcess::signal(int sig) {
    if (!reaped_) ::kill(pid_, sig);
}

int ChildProcess::exit_code() const {
    if (WIFEXITED(status_)) return WEXITSTATUS(status_);
    if (WIFSIGNALED(status_)) return 128 + WTERMSIG(status_);
    return -1;
}

int ChildProcess::wait() {
    if (!reaped_) {
        while (::waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
        }
        reaped_ = true;
    }
    return exit_code();
}

std::optional<int> ChildProcess::wait_for(std::chrono::milliseconds timeout) {
    // waitpid has no timeout; polling every 10 ms bounds both the wait and the work.
    const auto deadline = Clock::now() + timeout;
    while (!reaped_) {
        const pid_t r = ::waitpid(pid_, &status_, WNOHANG);
        if (r == pid_ || (r < 0 && errno != EINTR)) {
            reaped_ = true;
            break;
        }
        if (Clock::now() >= deadline) return std::nullopt;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return exit_code();
}

}  // namespace lockstep::testing
