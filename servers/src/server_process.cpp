#include "server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <sstream>
#include <thread>

#include "lockstep/core/error.h"

namespace lockstep::servers_detail {

std::string find_executable(const std::string& name) {
    // A name with a slash is a path, as for execvp.
    if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : std::string();
    std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
    path += ":/usr/sbin:/usr/local/sbin:/usr/bin:/usr/local/bin";
    std::stringstream dirs(path);
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
        if (dir.empty()) continue;
        std::string candidate = dir + "/" + name;
        if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    return {};
}

pid_t spawn(const std::vector<std::string>& argv, const std::string& log_path, const std::string& pid_path) {
    // Everything the child needs is prepared before fork: between fork and exec in a
    // multi-threaded process only async-signal-safe calls are allowed (no allocation).
    std::vector<char*> args;
    args.reserve(argv.size() + 1);
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const char* log = log_path.c_str();
    const char* pidfile = pid_path.c_str();

    pid_t pid = ::fork();
    if (pid < 0) throw ConnectionError(std::string("fork failed: ") + std::strerror(errno));
    if (pid == 0) {
        ::setpgid(0, 0);  // own group: we (and the reaper) kill the whole group, helpers included
        int devnull = ::open("/dev/null", O_RDONLY);
        if (devnull >= 0) ::dup2(devnull, 0);
        int out = ::open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (out >= 0) {
            ::dup2(out, 1);
            ::dup2(out, 2);
        }
        // Write our pid (digits by hand: snprintf is not async-signal-safe).
        char digits[24];
        int n = 0;
        for (pid_t p = ::getpid(); p > 0; p /= 10) digits[n++] = static_cast<char>('0' + p % 10);
        char buf[24];
        for (int i = 0; i < n; ++i) buf[i] = digits[n - 1 - i];
        buf[n++] = '\n';
        int pf = ::open(pidfile, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (pf >= 0) {
            (void)!::write(pf, buf, n);
            ::close(pf);
        }
        ::execv(args[0], args.data());
        _exit(127);
    }
    ::setpgid(pid, pid);  // also from the parent, so the group exists before we might kill it
    return pid;
}

bool has_exited(pid_t pid, int* status) {
    int st = 0;
    pid_t r = ::waitpid(pid, &st, WNOHANG);
    if (r == pid) {
        if (status) *status = st;
        return true;
    }
    return r < 0 && errno == ECHILD;
}

void kill_and_reap(pid_t pid) {
    if (pid <= 0) return;
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
}

int wait_exit(pid_t pid, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    int st = 0;
    while (std::chrono::steady_clock::now() < deadline) {
        if (has_exited(pid, &st)) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill_and_reap(pid);
    return -1;
}

int free_loopback_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw ConnectionError(std::string("socket: ") + std::strerror(errno));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        ::close(fd);
        throw ConnectionError(std::string("cannot find a free loopback port: ") + std::strerror(errno));
    }
    ::close(fd);
    return ntohs(addr.sin_port);
}

std::string tail_of(const std::string& path, int lines) {
    std::ifstream in(path);
    std::deque<std::string> last;
    std::string line;
    while (std::getline(in, line)) {
        last.push_back(line);
        if (static_cast<int>(last.size()) > lines) last.pop_front();
    }
    std::string out;
    for (const auto& l : last) out += "\n  | " + l;
    return out;
}

}  // namespace lockstep::servers_detail
