#include "locks_test_support.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>
#include <vector>

#include "lockstep/core/uri.h"
#include "test_servers.h"

extern char** environ;

namespace lockstep::test {

std::unique_ptr<RedisClient> make_redis() {
    RedisOptions o = servers().redis_options();
    o.pool_size = 16;
    return std::make_unique<RedisClient>(o);
}

LockProcess::LockProcess(const std::string& prefix, LockClientOptions options) : redis(make_redis()) {
    options.prefix = prefix;
    locks = std::make_unique<RedisLockClient>(*redis, std::move(options));
}

Child::Child(const std::string& role, const std::map<std::string, std::string>& env) {
    int in_pipe[2], out_pipe[2];
    if (::pipe2(in_pipe, O_CLOEXEC) != 0 || ::pipe2(out_pipe, O_CLOEXEC) != 0) {
        throw std::runtime_error("pipe2 failed");
    }
    std::map<std::string, std::string> all;
    for (char** e = environ; *e; ++e) {
        std::string kv(*e);
        auto eq = kv.find('=');
        if (eq != std::string::npos) all[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    all["LOCKSTEP_LOCKS_CHILD"] = role;
    all["LOCKSTEP_LOCKS_REDIS"] = servers().redis_url();
    all["LOCKSTEP_LOCKS_MYSQL"] = servers().mysql_url();
    for (const auto& [k, v] : env) all[k] = v;
    std::vector<std::string> strings;
    for (const auto& [k, v] : all) strings.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& s : strings) envp.push_back(s.data());
    envp.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
    std::string exe = "/proc/self/exe";
    char* argv[] = {exe.data(), nullptr};
    int rc = posix_spawn(&pid_, exe.c_str(), &actions, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(in_pipe[0]);
    ::close(out_pipe[1]);
    if (rc != 0) {
        ::close(in_pipe[1]);
        ::close(out_pipe[0]);
        throw std::runtime_error(std::string("posix_spawn failed: ") + std::strerror(rc));
    }
    in_ = in_pipe[1];
    out_ = out_pipe[0];
}

Child::~Child() {
    if (!reaped_ && pid_ > 0) {
        ::kill(pid_, SIGKILL);
        ::kill(pid_, SIGCONT);
        wait();
    }
    if (in_ >= 0) ::close(in_);
    if (out_ >= 0) ::close(out_);
}

std::optional<std::string> Child::read_line(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        auto nl = buffer_.find('\n');
        if (nl != std::string::npos) {
            std::string line = buffer_.substr(0, nl);
            buffer_.erase(0, nl + 1);
            return line;
        }
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                          std::chrono::steady_clock::now());
        if (left.count() <= 0) return std::nullopt;
        pollfd p{out_, POLLIN, 0};
        int n = ::poll(&p, 1, static_cast<int>(left.count()));
        if (n <= 0) continue;
        char buf[512];
        ssize_t got = ::read(out_, buf, sizeof buf);
        if (got <= 0) return std::nullopt;  // EOF: the child is gone
        buffer_.append(buf, static_cast<std::size_t>(got));
    }
}

std::optional<std::string> Child::expect(const std::string& prefix, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                          std::chrono::steady_clock::now());
        if (left.count() <= 0) return std::nullopt;
        auto line = read_line(left);
        if (!line) return std::nullopt;
        if (line->rfind(prefix, 0) == 0) return line;
    }
}

void Child::send(const std::string& line) {
    std::string l = line + "\n";
    if (::write(in_, l.data(), l.size()) != static_cast<ssize_t>(l.size())) {
        throw std::runtime_error("write to child failed");
    }
}

void Child::signal(int sig) {
    ::kill(pid_, sig);
}

int Child::wait() {
    if (!reaped_) {
        while (::waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
        }
        reaped_ = true;
    }
    if (WIFEXITED(status_)) return WEXITSTATUS(status_);
    if (WIFSIGNALED(status_)) return 128 + WTERMSIG(status_);
    return -1;
}

}  // namespace lockstep::test
