#include "lockstep/servers/fault_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"
#include "lockstep/core/mutex.h"

namespace lockstep {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// What one direction does with the bytes sent into it.
enum class Flow { Pass, Latency, Blackhole, Stall };

struct DirectionMode {
    Flow flow = Flow::Pass;
    milliseconds fixed{0};
    milliseconds jitter{0};
    bool forwards() const { return flow == Flow::Pass || flow == Flow::Latency; }
};

// What happens to connections as a whole.
enum class Admission { Open, Reset, Refuse };

struct Mode {
    DirectionMode to_server;
    DirectionMode to_client;
    Admission admission = Admission::Open;
};

// One setter's change: a direction's flow (which also ends reset and refuse: the last setter
// wins), or what happens to connections.
struct ModeChange {
    bool directional = true;
    FaultDirection direction = FaultDirection::Both;
    DirectionMode flow;
    Admission admission = Admission::Open;

    static ModeChange of(FaultDirection d, DirectionMode m) { return {true, d, m, Admission::Open}; }
    static ModeChange of(Admission a) { return {false, FaultDirection::Both, {}, a}; }

    void apply_to(Mode& m) const {
        if (directional) {
            if (direction != FaultDirection::ServerToClient) m.to_server = flow;
            if (direction != FaultDirection::ClientToServer) m.to_client = flow;
        }
        m.admission = admission;
    }
};

std::string errno_text(int error) {
    return std::strerror(error);
}

// Closes `fd` so that the peer gets an RST instead of a FIN.
void close_with_reset(int fd) {
    if (fd < 0) return;
    linger l{};
    l.l_onoff = 1;
    l.l_linger = 0;
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    ::close(fd);
}

void close_fd(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
}

// Bytes read from one side and not yet written to the other, in order, each with the time it
// may leave (now under pass, later under latency).
struct Chunk {
    Clock::time_point due;
    std::string bytes;
    std::size_t sent = 0;
};

// One direction of one connection: reads `in`, writes `out`.
struct Pipe {
    std::deque<Chunk> queue;
    std::size_t queued = 0;      // bytes in `queue` not yet sent
    Clock::time_point last_due;  // no chunk leaves before the one read before it (order under jitter)
    bool eof = false;            // `in` reached its end (or failed): nothing more to read
    Clock::time_point eof_due;   // when the end may be forwarded (after the last chunk)
    bool eof_sent = false;       // shutdown(out, SHUT_WR) done
    bool blocked = false;        // the last write to `out` would have blocked: wait for POLLOUT
};

struct Connection {
    int client = -1;
    int server = -1;
    bool connecting = true;  // the upstream connect is in progress
    Clock::time_point connect_deadline;
    Pipe up;              // client -> server
    Pipe down;            // server -> client
    bool broken = false;  // to be closed at the end of this turn
};

// True, with `out` set, when `host` is an IPv4 loopback address (or "localhost").
bool loopback_address(const std::string& host, in_addr& out) {
    const std::string literal = host == "localhost" ? "127.0.0.1" : host;
    if (::inet_pton(AF_INET, literal.c_str(), &out) != 1) return false;
    return (ntohl(out.s_addr) >> 24) == 127;
}

}  // namespace

struct FaultProxy::Impl {
    FaultProxyOptions options;
    std::string upstream_host;
    int upstream_port = 0;
    sockaddr_in upstream{};
    int port = 0;

    int listen_fd = -1;  // owned by the thread once it runs (-1 while refusing)
    int wake_fd = -1;    // eventfd: a setter or the destructor wants the thread's attention

    Mutex mutex;
    CondVar applied_cv;
    Mode requested GUARDED_BY(mutex);
    std::uint64_t requested_generation GUARDED_BY(mutex) = 0;
    std::uint64_t applied_generation GUARDED_BY(mutex) = 0;
    std::string apply_error GUARDED_BY(mutex);  // of the last generation applied
    std::string thread_failure GUARDED_BY(mutex);
    bool stopping GUARDED_BY(mutex) = false;

    std::atomic<std::uint64_t> accepted{0}, open{0}, resets{0}, to_server{0}, to_client{0}, discarded{0};

    // The thread's own state.
    Mode mode;
    std::vector<std::unique_ptr<Connection>> connections;
    std::mt19937_64 rng;

    std::thread thread;

    // A setter: changes the requested mode, wakes the thread and waits until it applied it.
    void request(const ModeChange& change) EXCLUDES(mutex) {
        MutexLock lock(mutex);
        const std::string stopped = "fault proxy on port " + std::to_string(port) + ": its thread stopped: ";
        if (!thread_failure.empty()) throw ConnectionError(stopped + thread_failure);
        change.apply_to(requested);
        const std::uint64_t generation = ++requested_generation;
        wake();
        const auto deadline = Clock::now() + options.apply_timeout;
        while (applied_generation < generation && thread_failure.empty()) {
            if (applied_cv.wait_until(mutex, deadline) == std::cv_status::timeout) break;
        }
        if (!thread_failure.empty()) throw ConnectionError(stopped + thread_failure);
        if (applied_generation < generation) {
            throw TimeoutError("fault proxy on port " + std::to_string(port) +
                               ": a mode change was not applied in " +
                               std::to_string(options.apply_timeout.count()) + " ms");
        }
        // A later setter's generation may have been applied already; its error is its own.
        if (applied_generation == generation && !apply_error.empty()) {
            throw ConnectionError("fault proxy: " + apply_error);
        }
    }

    void wake() {
        const std::uint64_t one = 1;
        [[maybe_unused]] auto n = ::write(wake_fd, &one, sizeof one);
    }

    // Makes `listen_fd` a socket listening on 127.0.0.1:wanted_port (0: a free one) and sets
    // `bound_port`. "" or why not.
    std::string listen_on(int wanted_port, int& bound_port) {
        int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) return "socket: " + errno_text(errno);
        const int yes = 1;
        // Listening again on the port after refuse() while connections accepted on it live on.
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(static_cast<std::uint16_t>(wanted_port));
        if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 128) != 0) {
            const int error = errno;
            ::close(fd);
            return "listen on 127.0.0.1:" + std::to_string(wanted_port) + ": " + errno_text(error);
        }
        socklen_t len = sizeof a;
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
        bound_port = ntohs(a.sin_port);
        listen_fd = fd;
        return "";
    }

    // Applies a new mode to the listener and every connection. Returns "" or why it could not.
    std::string apply(const Mode& next) {
        std::string error;
        const Mode previous = mode;
        mode = next;
        if (mode.admission == Admission::Refuse) {
            close_fd(listen_fd);  // clients still in the backlog get an RST
        } else if (listen_fd < 0) {
            int same_port = 0;
            error = listen_on(port, same_port);
            if (!error.empty()) mode.admission = Admission::Refuse;
        }
        if (mode.admission == Admission::Reset) {
            for (auto& c : connections) reset_connection(*c);
        }
        // Entering blackhole drops what a direction holds: nothing more leaves it.
        for (auto& c : connections) {
            if (mode.to_server.flow == Flow::Blackhole && previous.to_server.flow != Flow::Blackhole)
                drop(c->up);
            if (mode.to_client.flow == Flow::Blackhole && previous.to_client.flow != Flow::Blackhole)
                drop(c->down);
        }
        return error;
    }

    void drop(Pipe& p) {
        discarded.fetch_add(p.queued);
        p.queue.clear();
        p.queued = 0;
        p.blocked = false;
    }

    void reset_connection(Connection& c) {
        if (c.broken) return;
        close_with_reset(c.client);
        close_with_reset(c.server);
        c.client = c.server = -1;
        c.broken = true;
        resets.fetch_add(1);
    }

    // The time a chunk (or the end) read now may leave, under `m`, after everything before it.
    Clock::time_point due_time(const DirectionMode& m, Pipe& p, Clock::time_point now) {
        Clock::time_point due = now;
        if (m.flow == Flow::Latency) {
            due += m.fixed;
            if (m.jitter.count() > 0) {
                std::uniform_int_distribution<long long> us(0, std::chrono::microseconds(m.jitter).count());
                due += std::chrono::microseconds(us(rng));
            }
        }
        due = std::max(due, p.last_due);
        p.last_due = due;
        return due;
    }

    bool wants_read(const Connection& c, const Pipe& p, const DirectionMode& m, bool is_up) const {
        if (c.broken || p.eof || m.flow == Flow::Stall) return false;
        if (!is_up && c.connecting) return false;
        return m.flow == Flow::Blackhole || p.queued < options.buffer_bytes;
    }

    void read_into(Pipe& p, const DirectionMode& m, int in, Clock::time_point now) {
        char buffer[64 * 1024];
        const std::size_t room = m.flow == Flow::Blackhole
                                     ? sizeof buffer
                                     : std::min(sizeof buffer, options.buffer_bytes - p.queued);
        const ssize_t n = ::recv(in, buffer, room, 0);
        if (n > 0) {
            if (m.flow == Flow::Blackhole) {
                discarded.fetch_add(static_cast<std::uint64_t>(n));
                return;
            }
            p.queue.push_back(Chunk{due_time(m, p, now), std::string(buffer, static_cast<std::size_t>(n))});
            p.queued += static_cast<std::size_t>(n);
        } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            // The end of this side, or a broken side: forwarded as an end, in order.
            p.eof = true;
            p.eof_due = due_time(m, p, now);
        }
    }

    // Writes what is due; forwards the end once everything before it left.
    void write_from(Connection& c, Pipe& p, const DirectionMode& m, int out, Clock::time_point now,
                    std::atomic<std::uint64_t>& counter) {
        if (c.broken || c.connecting || !m.forwards() || p.blocked) return;
        while (!p.queue.empty() && p.queue.front().due <= now) {
            Chunk& chunk = p.queue.front();
            const ssize_t n =
                ::send(out, chunk.bytes.data() + chunk.sent, chunk.bytes.size() - chunk.sent, MSG_NOSIGNAL);
            if (n < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK) {
                    p.blocked = true;
                    return;
                }
                if (errno == EINTR) continue;
                c.broken = true;  // the receiver is gone: the connection ends
                return;
            }
            chunk.sent += static_cast<std::size_t>(n);
            p.queued -= static_cast<std::size_t>(n);
            counter.fetch_add(static_cast<std::uint64_t>(n));
            if (chunk.sent == chunk.bytes.size()) p.queue.pop_front();
        }
        if (p.queue.empty() && p.eof && !p.eof_sent && p.eof_due <= now) {
            ::shutdown(out, SHUT_WR);
            p.eof_sent = true;
        }
    }

    // The next instant a pipe has something to do without a socket event.
    static void next_timer(const Pipe& p, const DirectionMode& m, Clock::time_point& next) {
        if (!m.forwards() || p.blocked) return;
        if (!p.queue.empty()) {
            next = std::min(next, p.queue.front().due);
        } else if (p.eof && !p.eof_sent) {
            next = std::min(next, p.eof_due);
        }
    }

    void accept_new(Clock::time_point now) {
        while (listen_fd >= 0 && connections.size() < options.max_connections) {
            const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) return;  // EAGAIN, or a client that gave up in the backlog
            accepted.fetch_add(1);
            if (mode.admission == Admission::Reset) {
                close_with_reset(fd);
                resets.fetch_add(1);
                continue;
            }
            auto c = std::make_unique<Connection>();
            c->client = fd;
            c->connect_deadline = now + options.connect_timeout;
            c->server = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (c->server < 0 ||
                (::connect(c->server, reinterpret_cast<const sockaddr*>(&upstream), sizeof upstream) != 0 &&
                 errno != EINPROGRESS)) {
                upstream_failed(*c);
            } else {
                const int yes = 1;
                ::setsockopt(c->server, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
                ::setsockopt(c->client, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
            }
            open.fetch_add(1);
            connections.push_back(std::move(c));
        }
    }

    void upstream_failed(Connection& c) {
        close_with_reset(c.client);
        close_fd(c.server);
        c.client = -1;
        c.broken = true;
        resets.fetch_add(1);
    }

    // The upstream socket became writable (or failed): connected, or the client is reset.
    void finish_connect(Connection& c) {
        int error = 0;
        socklen_t len = sizeof error;
        if (::getsockopt(c.server, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error == 0) {
            c.connecting = false;
        } else {
            upstream_failed(c);
        }
    }

    void close_connection(Connection& c) {
        close_fd(c.client);
        close_fd(c.server);
    }

    void run();
    void loop();
};

void FaultProxy::Impl::run() {
    try {
        loop();
    } catch (const std::exception& e) {
        logger()->error("fault proxy on port {}: its thread stopped: {}", port, e.what());
        MutexLock lock(mutex);
        thread_failure = e.what();
        applied_cv.notify_all();
    }
    for (auto& c : connections) close_connection(*c);
    connections.clear();
    open.store(0);
}

void FaultProxy::Impl::loop() {
    std::vector<pollfd> fds;
    // For each pollfd after the first two: the connection and whether it is the client side.
    std::vector<std::pair<Connection*, bool>> owners;
    std::uint64_t seen_generation = 0;
    while (true) {
        // 1. A new mode, from a setter.
        Mode next;
        std::uint64_t generation = 0;
        {
            MutexLock lock(mutex);
            if (stopping) return;
            if (requested_generation != seen_generation) {
                next = requested;
                generation = requested_generation;
            }
        }
        if (generation != 0) {
            std::string error = apply(next);
            seen_generation = generation;
            MutexLock lock(mutex);
            applied_generation = generation;
            apply_error = std::move(error);
            applied_cv.notify_all();
        }

        // 2. What each socket waits for, and the next timer.
        Clock::time_point now = Clock::now();
        Clock::time_point next_due = Clock::time_point::max();
        fds.clear();
        owners.clear();
        fds.push_back({wake_fd, POLLIN, 0});
        const bool accepting = listen_fd >= 0 && connections.size() < options.max_connections;
        fds.push_back({accepting ? listen_fd : -1, POLLIN, 0});
        for (auto& c : connections) {
            if (c->broken) continue;
            short client_events = 0;
            short server_events = 0;
            if (c->connecting) {
                server_events |= POLLOUT;
                next_due = std::min(next_due, c->connect_deadline);
            }
            if (wants_read(*c, c->up, mode.to_server, true)) client_events |= POLLIN;
            if (wants_read(*c, c->down, mode.to_client, false)) server_events |= POLLIN;
            if (c->up.blocked) server_events |= POLLOUT;
            if (c->down.blocked) client_events |= POLLOUT;
            if (!c->connecting) {  // nothing leaves before the upstream connect completes
                next_timer(c->up, mode.to_server, next_due);
                next_timer(c->down, mode.to_client, next_due);
            }
            // A socket nobody reads or writes is left out: poll would report its hang-up at once,
            // again and again.
            fds.push_back({client_events ? c->client : -1, client_events, 0});
            owners.emplace_back(c.get(), true);
            fds.push_back({server_events ? c->server : -1, server_events, 0});
            owners.emplace_back(c.get(), false);
        }
        int timeout_ms = -1;
        if (next_due != Clock::time_point::max()) {
            const auto wait = std::chrono::ceil<milliseconds>(next_due - now).count();
            timeout_ms = static_cast<int>(std::clamp<long long>(wait, 0, 60'000));
        }

        // 3. Sleep until something happens.
        if (::poll(fds.data(), fds.size(), timeout_ms) < 0) {
            if (errno == EINTR) continue;
            throw ConnectionError("fault proxy: poll: " + errno_text(errno));
        }
        now = Clock::now();
        if (fds[0].revents != 0) {
            std::uint64_t count = 0;
            [[maybe_unused]] auto n = ::read(wake_fd, &count, sizeof count);
        }
        if (fds[1].revents != 0) accept_new(now);

        // 4. Socket events: finish connects, read, note writable sockets.
        for (std::size_t i = 2; i < fds.size(); ++i) {
            const short revents = fds[i].revents;
            if (revents == 0) continue;
            auto [c, client_side] = owners[i - 2];
            if (c->broken) continue;
            if (client_side) {
                if (revents & POLLOUT || ((revents & (POLLERR | POLLHUP)) && c->down.blocked))
                    c->down.blocked = false;
                if ((fds[i].events & POLLIN) && (revents & (POLLIN | POLLHUP | POLLERR)))
                    read_into(c->up, mode.to_server, c->client, now);
            } else {
                if (c->connecting) {
                    finish_connect(*c);
                    if (c->broken) continue;
                }
                if (revents & POLLOUT || ((revents & (POLLERR | POLLHUP)) && c->up.blocked))
                    c->up.blocked = false;
                if ((fds[i].events & POLLIN) && (revents & (POLLIN | POLLHUP | POLLERR)))
                    read_into(c->down, mode.to_client, c->server, now);
            }
        }

        // 5. Timers and writes: connects past their deadline, chunks that are due, ends.
        for (auto& c : connections) {
            if (c->broken) continue;
            if (c->connecting && now >= c->connect_deadline) upstream_failed(*c);
            write_from(*c, c->up, mode.to_server, c->server, now, to_server);
            write_from(*c, c->down, mode.to_client, c->client, now, to_client);
            if (c->up.eof_sent && c->down.eof_sent) c->broken = true;  // both ends forwarded: done
        }
        const auto done = std::remove_if(connections.begin(), connections.end(), [&](const auto& c) {
            if (!c->broken) return false;
            close_connection(*c);
            open.fetch_sub(1);
            return true;
        });
        connections.erase(done, connections.end());
    }
}

FaultProxy::FaultProxy(std::string upstream_host, int upstream_port, FaultProxyOptions options)
    : impl_(std::make_unique<Impl>()) {
    Impl& s = *impl_;
    in_addr address{};
    if (!loopback_address(upstream_host, address)) {
        throw ConfigError(
            "FaultProxy upstream host",
            "only IPv4 loopback upstreams (127.0.0.0/8, localhost) are proxied: " + upstream_host);
    }
    if (upstream_port < 1 || upstream_port > 65535) {
        throw ConfigError("FaultProxy upstream port", "not in 1..65535: " + std::to_string(upstream_port));
    }
    if (options.max_connections == 0)
        throw ConfigError("FaultProxyOptions.max_connections", "must be at least 1");
    if (options.buffer_bytes == 0) throw ConfigError("FaultProxyOptions.buffer_bytes", "must be at least 1");
    s.options = options;
    s.upstream_host = std::move(upstream_host);
    s.upstream_port = upstream_port;
    s.upstream.sin_family = AF_INET;
    s.upstream.sin_addr = address;
    s.upstream.sin_port = htons(static_cast<std::uint16_t>(upstream_port));
    s.rng.seed(options.jitter_seed);
    s.wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s.wake_fd < 0) throw ConnectionError("FaultProxy: eventfd: " + errno_text(errno));
    if (std::string error = s.listen_on(0, s.port); !error.empty()) {
        ::close(s.wake_fd);
        throw ConnectionError("FaultProxy: " + error);
    }
    s.thread = std::thread([&s] { s.run(); });
}

FaultProxy::~FaultProxy() {
    {
        MutexLock lock(impl_->mutex);
        impl_->stopping = true;
    }
    impl_->wake();
    impl_->thread.join();
    close_fd(impl_->listen_fd);
    close_fd(impl_->wake_fd);
}

std::string FaultProxy::host() const {
    return "127.0.0.1";
}
int FaultProxy::port() const noexcept {
    return impl_->port;
}
std::string FaultProxy::address() const {
    return host() + ":" + std::to_string(port());
}
const std::string& FaultProxy::upstream_host() const noexcept {
    return impl_->upstream_host;
}
int FaultProxy::upstream_port() const noexcept {
    return impl_->upstream_port;
}
std::string FaultProxy::upstream_address() const {
    return impl_->upstream_host + ":" + std::to_string(impl_->upstream_port);
}

void FaultProxy::pass(FaultDirection direction) {
    impl_->request(ModeChange::of(direction, DirectionMode{}));
}

void FaultProxy::latency(milliseconds fixed, milliseconds jitter, FaultDirection direction) {
    if (fixed.count() < 0 || jitter.count() < 0)
        throw ConfigError("FaultProxy latency", "must not be negative");
    impl_->request(ModeChange::of(direction, DirectionMode{Flow::Latency, fixed, jitter}));
}

void FaultProxy::blackhole(FaultDirection direction) {
    impl_->request(ModeChange::of(direction, DirectionMode{Flow::Blackhole}));
}

void FaultProxy::stall(FaultDirection direction) {
    impl_->request(ModeChange::of(direction, DirectionMode{Flow::Stall}));
}

void FaultProxy::reset() {
    impl_->request(ModeChange::of(Admission::Reset));
}

void FaultProxy::refuse() {
    impl_->request(ModeChange::of(Admission::Refuse));
}

FaultProxyStats FaultProxy::stats() const {
    const Impl& s = *impl_;
    FaultProxyStats r;
    r.connections_accepted = s.accepted.load();
    r.connections_open = s.open.load();
    r.connections_reset = s.resets.load();
    r.bytes_to_server = s.to_server.load();
    r.bytes_to_client = s.to_client.load();
    r.bytes_discarded = s.discarded.load();
    return r;
}

}  // namespace lockstep
