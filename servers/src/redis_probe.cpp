#include "redis_probe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

namespace lockstep::servers_detail {
namespace {

// True once `buf` holds one whole reply of the simple forms the probes ask for. Arrays are
// taken as complete when the server pauses (they are only printed in error messages).
bool complete(const std::string& buf) {
    const auto eol = buf.find("\r\n");
    if (eol == std::string::npos) return false;
    if (buf[0] != '$') return buf[0] != '*';
    const long long n = std::stoll(buf.substr(1, eol - 1));
    return n < 0 || buf.size() >= eol + 2 + static_cast<std::size_t>(n) + 2;
}

}  // namespace

std::string redis_probe(int port, const std::vector<std::string>& args, std::chrono::milliseconds timeout) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return {};
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::string out;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
        std::string req = "*" + std::to_string(args.size()) + "\r\n";
        for (const auto& a : args) req += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
        if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
            const auto deadline = std::chrono::steady_clock::now() + timeout;
            while (!complete(out)) {
                const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now());
                if (left.count() <= 0) break;
                pollfd p{fd, POLLIN, 0};
                const int wait = out.empty() ? static_cast<int>(left.count()) : std::min<int>(50, left.count());
                if (::poll(&p, 1, wait) <= 0) break;
                char chunk[4096];
                const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
                if (n <= 0) break;
                out.append(chunk, static_cast<std::size_t>(n));
            }
        }
    }
    ::close(fd);
    return out;
}

std::string info_value(const std::string& text, const std::string& field) {
    // The field at the start of a line, so "role" does not match "master_role".
    std::size_t at = text.rfind(field + ":", 0) == 0 ? 0 : std::string::npos;
    if (at == std::string::npos) {
        at = text.find("\n" + field + ":");
        if (at == std::string::npos) return {};
        ++at;
    }
    const auto begin = at + field.size() + 1;
    return text.substr(begin, text.find_first_of("\r\n", begin) - begin);
}

LocalServersOptions private_redis_node(const std::string& redis_server, std::chrono::milliseconds start_timeout) {
    LocalServersOptions node;
    node.mysql = false;
    node.use_environment = false;
    node.redis_server = redis_server;
    node.start_timeout = start_timeout;
    return node;
}

std::vector<std::string> tls_node_args(const TlsCertificates& certs, int tls_port, bool cluster) {
    std::vector<std::string> args = {
        "--tls-port", std::to_string(tls_port),
        "--tls-cert-file", certs.server_cert,
        "--tls-key-file", certs.server_key,
        "--tls-ca-cert-file", certs.ca_file,
        "--tls-auth-clients", "no",
        "--tls-replication", "yes",
    };
    if (cluster) args.insert(args.end(), {"--tls-cluster", "yes"});
    return args;
}

bool poll_until(std::chrono::steady_clock::time_point deadline, std::chrono::milliseconds interval,
                const std::function<bool()>& condition) {
    while (!condition()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(interval);
    }
    return true;
}

}  // namespace lockstep::servers_detail
