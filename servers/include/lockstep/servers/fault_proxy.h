// FaultProxy: a loopback TCP proxy that puts network faults between clients and one server, so
// that a test can show what the library does when the network, not the process, misbehaves:
// packets dropped while connections stay open, latency, resets, refused connects. It listens on
// 127.0.0.1 (a free port) and forwards each connection to one upstream host:port on 127.0.0.0/8;
// a test points a client at `address()` (proxied_url.h rewrites URLs) and switches modes while
// the client runs:
//
//   lockstep::FaultProxy proxy("127.0.0.1", redis_port);
//   lockstep::RedisOptions o = lockstep::parse_redis_url(lockstep::proxied_url(redis_url, proxy));
//   o.socket_timeout = std::chrono::milliseconds(300);
//   lockstep::RedisClient redis(o);
//   redis.command({"PING"});                       // pass: forwarded as it is
//   proxy.blackhole();                             // read and dropped; connections stay open
//   redis.command({"PING"});                       // TimeoutError after 300 ms
//   proxy.pass();
//
// Modes, each in force on existing AND new connections when its setter returns:
//   pass       forward bytes as they come.
//   latency    hold each chunk read for `fixed` + a uniform [0, jitter] delay, keeping byte order.
//   blackhole  accept and keep connections open, read and discard everything, forward nothing
//              (a close is remembered and forwarded once the direction passes again, as TCP
//              would retransmit it: the server does not see a client vanish in a partition).
//   stall      stop reading, so the sender's socket buffers fill and its writes block; what the
//              proxy holds already stays held. Ends as pass, latency or blackhole resume.
//   reset      RST every connection (SO_LINGER 0, close) on both sides, and every new one at once.
//   refuse     close the listening socket: connects get ECONNREFUSED; existing connections keep
//              their direction modes. Any other mode listens again on the same port.
// A write the receiver refuses (it closed or reset its side) ends the whole connection, and what
// the proxy still held for either side is dropped.
// pass, latency, blackhole and stall can be set for one direction (client to server, server to
// client) only; reset and refuse are about connections. The last setter called wins: any
// directional setter ends reset and refuse.
//
// Bounded: at most `max_connections` open (more clients wait in the listen backlog), at most
// `buffer_bytes` held per connection and direction (reading stops while full), one thread
// sleeping in poll() until a socket is ready, a delayed chunk is due, or a setter wakes it. The
// destructor stops the thread and closes every socket. No child process: it lives and dies with
// the test.
//
// Thread safety: every member may be called from any thread. A setter blocks until the proxy's
// thread has applied the mode (TimeoutError after `apply_timeout`).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace lockstep {

enum class FaultDirection {
    Both,
    ClientToServer,  // what clients send to the server
    ServerToClient,  // the server's replies
};

struct FaultProxyOptions {
    // Connections open at once at most; more clients wait in the listen backlog until one closes.
    std::size_t max_connections = 64;
    // Bytes read but not yet forwarded, per connection and direction, at most.
    std::size_t buffer_bytes = 256 * 1024;
    // Deadline for connecting to the upstream server; a client whose upstream connect fails or
    // takes longer is reset.
    std::chrono::milliseconds connect_timeout{2000};
    // How long a setter waits for the proxy's thread to apply a mode.
    std::chrono::milliseconds apply_timeout{5000};
    // Seed of latency()'s jitter, so a run can be repeated.
    std::uint64_t jitter_seed = 1;
};

// Counters since construction.
struct FaultProxyStats {
    std::uint64_t connections_accepted = 0;
    std::uint64_t connections_open = 0;
    std::uint64_t connections_reset = 0;  // by reset(), or because the upstream connect failed
    std::uint64_t bytes_to_server = 0;    // forwarded client -> server
    std::uint64_t bytes_to_client = 0;    // forwarded server -> client
    std::uint64_t bytes_discarded = 0;    // read and dropped by blackhole, either direction
};

class FaultProxy {
public:
    // Listens on 127.0.0.1 at a free port, in pass mode. ConfigError unless `upstream_host` is an
    // IPv4 loopback address (127.0.0.0/8) or "localhost" and `upstream_port` is in 1..65535;
    // ConnectionError when no listening socket can be made.
    FaultProxy(std::string upstream_host, int upstream_port, FaultProxyOptions options = {});
    ~FaultProxy();
    FaultProxy(const FaultProxy&) = delete;
    FaultProxy& operator=(const FaultProxy&) = delete;

    // Where clients connect: "127.0.0.1", the port, "127.0.0.1:<port>".
    std::string host() const;
    int port() const noexcept;
    std::string address() const;
    // Where it forwards to, as given.
    const std::string& upstream_host() const noexcept;
    int upstream_port() const noexcept;
    std::string upstream_address() const;

    // A setter that ends refuse listens on the same port again: ConnectionError if another socket
    // took the port meanwhile (the proxy then goes on refusing).
    void pass(FaultDirection direction = FaultDirection::Both);
    void latency(std::chrono::milliseconds fixed,
                 std::chrono::milliseconds jitter = std::chrono::milliseconds(0),
                 FaultDirection direction = FaultDirection::Both);
    void blackhole(FaultDirection direction = FaultDirection::Both);
    void stall(FaultDirection direction = FaultDirection::Both);
    void reset();
    void refuse();

    FaultProxyStats stats() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep
