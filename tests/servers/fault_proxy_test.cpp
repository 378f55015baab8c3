// FaultProxy against a real private redis-server: each mode seen from a raw socket (what the
// bytes do) and from lockstep's own RedisClient (that the client's error is typed and on time).
#include "lockstep/servers/fault_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "eventually.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"
#include "lockstep/core/uri.h"
#include "lockstep/servers/local_servers.h"
#include "lockstep/servers/proxied_url.h"

namespace lockstep {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::eventually;

long long ms_since(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

// One private redis-server for the whole suite (never an external one: the proxy forwards to
// loopback only, and these tests must know nobody else talks to it).
LocalServers& redis_server() {
    static LocalServers instance([] {
        LocalServersOptions o;
        o.mysql = false;
        o.use_environment = false;
        return o;
    }());
    return instance;
}

// A blocking TCP socket for the raw-bytes checks; closed by the destructor.
class RawSocket {
public:
    explicit RawSocket(int port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(static_cast<std::uint16_t>(port));
        connect_errno_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 ? 0 : errno;
    }
    ~RawSocket() {
        if (fd_ >= 0) ::close(fd_);
    }
    RawSocket(const RawSocket&) = delete;
    RawSocket& operator=(const RawSocket&) = delete;

    int connect_errno() const { return connect_errno_; }
    int fd() const { return fd_; }
    void send_all(const std::string& bytes) const {
        ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
    }
    // Whether the socket turns readable (data, end or error) within `timeout`.
    bool readable_within(std::chrono::milliseconds timeout) const {
        pollfd p{fd_, POLLIN, 0};
        return ::poll(&p, 1, static_cast<int>(timeout.count())) > 0;
    }
    // The next bytes (up to 4 KiB) within `timeout`: "" at the end of the stream or on timeout;
    // `error` gets errno when recv fails.
    std::string receive(std::chrono::milliseconds timeout, int* error = nullptr) const {
        if (!readable_within(timeout)) return "";
        char buffer[4096];
        const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
        if (n < 0 && error) *error = errno;
        return n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : "";
    }

private:
    int fd_;
    int connect_errno_ = 0;
};

class FaultProxyTest : public ::testing::Test {
protected:
    void SetUp() override {
        proxy_ = std::make_unique<FaultProxy>("127.0.0.1", redis_server().redis_options().port);
        url_ = proxied_redis_url(redis_server().redis_url(), *proxy_);
    }
    // A client through the proxy with short deadlines, so each fault shows within a test.
    RedisOptions proxied_options(std::chrono::milliseconds socket_timeout = 300ms) const {
        RedisOptions o = parse_redis_url(url_);
        o.socket_timeout = socket_timeout;
        o.connect_timeout = 300ms;
        o.pool_size = 2;
        return o;
    }
    static std::string ping(RedisClient& redis) { return redis.command({"PING"}).str(); }

    std::unique_ptr<FaultProxy> proxy_;
    std::string url_;
};

TEST_F(FaultProxyTest, PassForwardsCommandsAndCountsBytesEachWay) {
    RedisClient redis(proxied_options());
    EXPECT_EQ(ping(redis), "PONG");
    redis.set("fp:pass", "value");
    RedisClient direct(redis_server().redis_options());
    EXPECT_EQ(direct.get("fp:pass").value_or(""), "value");
    const FaultProxyStats s = proxy_->stats();
    EXPECT_GE(s.connections_accepted, 1u);
    EXPECT_GE(s.connections_open, 1u);
    EXPECT_GE(s.bytes_to_server, std::string("*1\r\n$4\r\nPING\r\n").size());
    EXPECT_GE(s.bytes_to_client, std::string("+PONG\r\n").size());
    EXPECT_EQ(s.bytes_discarded, 0u);
}

TEST_F(FaultProxyTest, LatencyDelaysEachRoundTripByAtLeastTheFixedDelay) {
    RedisClient redis(proxied_options(5s));
    ASSERT_EQ(ping(redis), "PONG");  // the connection exists: only the round trip is measured

    proxy_->latency(150ms);  // each way
    auto t0 = Clock::now();
    EXPECT_EQ(ping(redis), "PONG");
    const long long both = ms_since(t0);
    EXPECT_GE(both, 300);
    EXPECT_LT(both, 300 + 2000);

    proxy_->latency(150ms, 0ms, FaultDirection::ServerToClient);
    proxy_->pass(FaultDirection::ClientToServer);
    t0 = Clock::now();
    EXPECT_EQ(ping(redis), "PONG");
    const long long replies_only = ms_since(t0);
    EXPECT_GE(replies_only, 150);
    EXPECT_LT(replies_only, 150 + 2000);

    proxy_->pass();
    t0 = Clock::now();
    EXPECT_EQ(ping(redis), "PONG");
    const long long passed = ms_since(t0);
    EXPECT_LT(passed, 150);
    std::cout << "[ measure ] PING through the proxy: " << both << " ms with 150 ms each way, "
              << replies_only << " ms with 150 ms on replies, " << passed << " ms in pass\n";
}

TEST_F(FaultProxyTest, JitterDelaysChunksButKeepsTheirOrder) {
    // Chunks of 2 MB of pipelined writes and replies each get their own random delay: a chunk
    // overtaking another would corrupt the RESP stream.
    proxy_->latency(1ms, 20ms);
    RedisClient redis(proxied_options(10s));
    std::vector<std::vector<std::string>> sets, gets;
    for (int i = 0; i < 100; ++i) {
        const std::string key = "fp:jitter:" + std::to_string(i);
        sets.push_back(
            {"SET", key, std::string(20'000, static_cast<char>('a' + i % 26)) + std::to_string(i)});
        gets.push_back({"GET", key});
    }
    for (const auto& r : redis.pipeline(sets)) EXPECT_EQ(r.str(), "OK");
    const auto replies = redis.pipeline(gets);
    ASSERT_EQ(replies.size(), gets.size());
    for (std::size_t i = 0; i < replies.size(); ++i) EXPECT_EQ(replies[i].str(), sets[i][2]) << "reply " << i;
    EXPECT_GT(proxy_->stats().bytes_to_server, 2'000'000u);
}

TEST_F(FaultProxyTest, BlackholeKeepsConnectionsOpenAndTheClientTimesOutTyped) {
    RedisClient redis(proxied_options(300ms));
    ASSERT_EQ(ping(redis), "PONG");
    RawSocket raw(proxy_->port());
    ASSERT_EQ(raw.connect_errno(), 0);
    raw.send_all("PING\r\n");
    ASSERT_EQ(raw.receive(5s), "+PONG\r\n");

    proxy_->blackhole();
    const auto t0 = Clock::now();
    try {
        ping(redis);
        ADD_FAILURE() << "PING answered through a blackhole";
    } catch (const ConnectionError& e) {
        EXPECT_NE(dynamic_cast<const TimeoutError*>(&e), nullptr) << "not a TimeoutError: " << e.what();
        const long long waited = ms_since(t0);
        EXPECT_GE(waited, 250) << e.what();  // it waited for its socket timeout, not less
        EXPECT_LT(waited, 300 + 1500) << e.what();
        std::cout << "[ measure ] PING into a blackhole failed after " << waited
                  << " ms (socket_timeout 300 ms): " << e.what() << "\n";
    }

    // The raw connection stays open: nothing arrives, no end, no reset.
    raw.send_all("PING\r\n");
    EXPECT_FALSE(raw.readable_within(500ms));
    EXPECT_TRUE(eventually([&] { return proxy_->stats().bytes_discarded >= 6; }));

    // A new connection is accepted too, and hears nothing.
    RawSocket late(proxy_->port());
    ASSERT_EQ(late.connect_errno(), 0);
    late.send_all("PING\r\n");
    EXPECT_FALSE(late.readable_within(300ms));

    // Back to pass: the same connections work again (what was sent meanwhile is gone).
    proxy_->pass();
    raw.send_all("PING\r\n");
    EXPECT_EQ(raw.receive(5s), "+PONG\r\n");
    late.send_all("PING\r\n");
    EXPECT_EQ(late.receive(5s), "+PONG\r\n");
    EXPECT_EQ(ping(redis), "PONG");
}

TEST_F(FaultProxyTest, ABlackholedReplyLeavesTheCommandAppliedAndTheClientTimedOut) {
    RedisClient redis(proxied_options(300ms));
    ASSERT_EQ(ping(redis), "PONG");
    proxy_->blackhole(FaultDirection::ServerToClient);
    EXPECT_THROW(redis.set("fp:applied", "yes"), TimeoutError);
    RedisClient direct(redis_server().redis_options());
    EXPECT_EQ(direct.get("fp:applied").value_or("not applied"), "yes");
}

TEST_F(FaultProxyTest, StallStopsReadingSoTheSendersWritesBlockUntilItPasses) {
    proxy_->stall(FaultDirection::ClientToServer);
    const std::uint64_t forwarded_before = proxy_->stats().bytes_to_server;

    // A 32 MB SET written by a non-blocking socket: it stops far short of the end.
    const std::size_t size = 32u << 20;
    const std::string command = "*3\r\n$3\r\nSET\r\n$8\r\nfp:stall\r\n$" + std::to_string(size) + "\r\n" +
                                std::string(size, 'x') + "\r\n";
    RawSocket raw(proxy_->port());
    ASSERT_EQ(raw.connect_errno(), 0);
    ::fcntl(raw.fd(), F_SETFL, ::fcntl(raw.fd(), F_GETFL, 0) | O_NONBLOCK);
    std::size_t written = 0;
    auto write_some = [&](std::chrono::milliseconds wait) {
        pollfd p{raw.fd(), POLLOUT, 0};
        if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return false;
        const ssize_t n = ::send(raw.fd(), command.data() + written, command.size() - written, MSG_NOSIGNAL);
        if (n > 0) written += static_cast<std::size_t>(n);
        return n > 0;
    };
    while (written < command.size() && write_some(300ms)) {
    }
    EXPECT_LT(written, command.size()) << "the whole command was taken in while stalled";
    EXPECT_EQ(proxy_->stats().bytes_to_server, forwarded_before);
    std::cout << "[ measure ] a stalled direction took " << (written >> 10) << " KiB of a " << (size >> 20)
              << " MB write before the sender blocked\n";

    // A client with a socket timeout gets a typed error meanwhile (its own connection is stalled too).
    RedisClient redis(proxied_options(300ms));
    EXPECT_THROW(ping(redis), TimeoutError);

    proxy_->pass();
    while (written < command.size()) ASSERT_TRUE(write_some(10s)) << "no progress after pass()";
    EXPECT_EQ(raw.receive(10s), "+OK\r\n");
    RedisClient direct(redis_server().redis_options());
    EXPECT_EQ(direct.command({"STRLEN", "fp:stall"}).integer(), static_cast<long long>(size));
    direct.del({"fp:stall"});
}

TEST_F(FaultProxyTest, ResetBreaksEveryConnectionAtOnceAndNewOnesToo) {
    RedisClient redis(proxied_options(5s));  // a long timeout: the error must come from the reset
    ASSERT_EQ(ping(redis), "PONG");
    RawSocket raw(proxy_->port());
    raw.send_all("PING\r\n");
    ASSERT_EQ(raw.receive(5s), "+PONG\r\n");

    proxy_->reset();
    int error = 0;
    EXPECT_EQ(raw.receive(5s, &error), "");
    EXPECT_EQ(error, ECONNRESET);

    auto t0 = Clock::now();
    try {
        ping(redis);
        ADD_FAILURE() << "PING answered through a reset";
    } catch (const TimeoutError& e) {
        ADD_FAILURE() << "a reset surfaced as a timeout: " << e.what();
    } catch (const ConnectionError& e) {
        EXPECT_LT(ms_since(t0), 1000) << e.what();
    }

    RawSocket late(proxy_->port());  // the kernel completes the handshake; the proxy resets it
    int late_error = 0;
    EXPECT_EQ(late.receive(5s, &late_error), "");
    EXPECT_EQ(late_error, ECONNRESET);
    // The proxy counts a reset just after it closed the socket: the client may see the RST first.
    EXPECT_TRUE(eventually([&] { return proxy_->stats().connections_reset >= 3u; }, 5s))
        << proxy_->stats().connections_reset << " connections reset";

    proxy_->pass();
    RedisClient fresh(proxied_options(5s));
    EXPECT_EQ(ping(fresh), "PONG");
}

TEST_F(FaultProxyTest, RefuseMakesConnectsFailAndPassListensAgainOnTheSamePort) {
    RawSocket before(proxy_->port());
    before.send_all("PING\r\n");
    ASSERT_EQ(before.receive(5s), "+PONG\r\n");
    const int port = proxy_->port();

    proxy_->refuse();
    RawSocket refused(port);
    EXPECT_EQ(refused.connect_errno(), ECONNREFUSED);
    const auto t0 = Clock::now();
    try {
        RedisClient redis(proxied_options(5s));
        ping(redis);
        ADD_FAILURE() << "PING answered while the proxy refuses";
    } catch (const TimeoutError& e) {
        ADD_FAILURE() << "a refused connect surfaced as a timeout: " << e.what();
    } catch (const ConnectionError& e) {
        EXPECT_LT(ms_since(t0), 1000) << e.what();
    }
    // A connection made before keeps working.
    before.send_all("PING\r\n");
    EXPECT_EQ(before.receive(5s), "+PONG\r\n");

    proxy_->pass();
    EXPECT_EQ(proxy_->port(), port);
    RedisClient redis(proxied_options(5s));
    EXPECT_EQ(ping(redis), "PONG");
}

TEST_F(FaultProxyTest, AnUpstreamThatIsDownResetsTheClient) {
    int free_port = 0;
    {
        FaultProxy placeholder("127.0.0.1", 1);  // takes a free port, which is closed again below
        free_port = placeholder.port();
    }
    FaultProxy proxy("127.0.0.1", free_port);
    RawSocket raw(proxy.port());
    int error = 0;
    EXPECT_EQ(raw.receive(5s, &error), "");
    EXPECT_EQ(error, ECONNRESET);
    EXPECT_TRUE(eventually([&] { return proxy.stats().connections_reset == 1; }));
}

TEST_F(FaultProxyTest, AtMostMaxConnectionsAreOpenTheRestWaitInTheBacklog) {
    FaultProxyOptions o;
    o.max_connections = 2;
    FaultProxy proxy("127.0.0.1", redis_server().redis_options().port, o);
    auto first = std::make_unique<RawSocket>(proxy.port());
    RawSocket second(proxy.port());
    RawSocket third(proxy.port());
    for (const RawSocket* s : {first.get(), &second, &third}) s->send_all("PING\r\n");
    EXPECT_EQ(first->receive(5s), "+PONG\r\n");
    EXPECT_EQ(second.receive(5s), "+PONG\r\n");
    EXPECT_FALSE(third.readable_within(300ms));
    EXPECT_EQ(proxy.stats().connections_open, 2u);
    first.reset();  // one closes: the third is accepted and answered
    EXPECT_EQ(third.receive(5s), "+PONG\r\n");
    EXPECT_EQ(proxy.stats().connections_accepted, 3u);
}

double process_cpu_ms() {
    timespec t{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1000.0 + static_cast<double>(t.tv_nsec) / 1e6;
}

TEST_F(FaultProxyTest, AnIdleProxyWithConnectionsInEveryStateSleeps) {
    // Connections in the states where a careless poll loop spins: a client that closed into a
    // blackhole (its end is held), a stalled direction with bytes waiting, a half-closed one.
    RawSocket closed_in_blackhole(proxy_->port());
    RawSocket stalled(proxy_->port());
    RawSocket half_closed(proxy_->port());
    for (const RawSocket* s : {&closed_in_blackhole, &stalled, &half_closed}) {
        s->send_all("PING\r\n");
        ASSERT_EQ(s->receive(5s), "+PONG\r\n");
    }
    proxy_->blackhole(FaultDirection::ServerToClient);
    ::shutdown(half_closed.fd(), SHUT_WR);  // the server's answering end is held in the blackhole
    proxy_->stall(FaultDirection::ClientToServer);
    stalled.send_all("PING\r\n");
    ::shutdown(closed_in_blackhole.fd(), SHUT_RDWR);
    proxy_->blackhole();
    // The stalled PING is read now and due in 10 s; the ends read in the blackhole stay held.
    proxy_->latency(10s, 0ms, FaultDirection::ClientToServer);

    const double cpu_before = process_cpu_ms();
    std::this_thread::sleep_for(1s);  // the window in which nothing may run
    const double cpu_ms = process_cpu_ms() - cpu_before;
    EXPECT_LT(cpu_ms, 100.0) << "the proxy's thread ran " << cpu_ms << " ms of CPU in 1 s while idle";
    std::cout << "[ measure ] an idle proxy with 3 connections used " << cpu_ms << " ms of CPU in 1 s\n";
    EXPECT_EQ(proxy_->stats().connections_open, 3u);
}

std::size_t open_fds() {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
    return n;
}

std::size_t threads() {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
    return n;
}

TEST_F(FaultProxyTest, DestructionJoinsItsThreadAndClosesEverySocket) {
    proxy_.reset();
    const std::size_t fds_before = open_fds();
    const std::size_t threads_before = threads();
    {
        FaultProxy proxy("127.0.0.1", redis_server().redis_options().port);
        std::vector<std::unique_ptr<RawSocket>> clients;
        for (int i = 0; i < 4; ++i) {
            clients.push_back(std::make_unique<RawSocket>(proxy.port()));
            clients.back()->send_all("PING\r\n");
            ASSERT_EQ(clients.back()->receive(5s), "+PONG\r\n");
        }
        proxy.latency(500ms);
        clients[0]->send_all("PING\r\n");  // held in the proxy at destruction
        proxy.blackhole(FaultDirection::ServerToClient);
        EXPECT_EQ(threads(), threads_before + 1);
        clients.clear();
    }
    EXPECT_EQ(open_fds(), fds_before);
    EXPECT_EQ(threads(), threads_before);
}

TEST(FaultProxyConfig, OnlyLoopbackUpstreamsArePermitted) {
    EXPECT_THROW(FaultProxy("10.0.0.5", 6379), ConfigError);
    EXPECT_THROW(FaultProxy("example.com", 6379), ConfigError);
    EXPECT_THROW(FaultProxy("::1", 6379), ConfigError);
    EXPECT_THROW(FaultProxy("127.0.0.1", 0), ConfigError);
    EXPECT_THROW(FaultProxy("127.0.0.1", 70000), ConfigError);
    EXPECT_NO_THROW(FaultProxy("localhost", 6379));
    EXPECT_NO_THROW(FaultProxy("127.0.0.2", 6379));
}

TEST(ProxiedUrl, RewritesOnlyTheProxysUpstreamAndKeepsEverythingElse) {
    FaultProxy proxy("127.0.0.1", 6380);
    const std::string p = proxy.address();
    EXPECT_EQ(proxied_redis_url("redis://:s%40cret@127.0.0.1:6380/2?socket_timeout=300ms", proxy),
              "redis://:s%40cret@" + p + "/2?socket_timeout=300ms");
    EXPECT_EQ(proxied_redis_url("redis-fair://localhost:6380", proxy), "redis-fair://" + p);
    EXPECT_EQ(proxied_url("zookeeper://127.0.0.1:2181,127.0.0.1:6380,127.0.0.1:2183?session_timeout_ms=1500",
                          proxy),
              "zookeeper://127.0.0.1:2181," + p + ",127.0.0.1:2183?session_timeout_ms=1500");
    EXPECT_EQ(proxied_zookeeper_url("zookeeper://127.0.0.1:6380", proxy), "zookeeper://" + p);

    FaultProxy mysql_proxy("127.0.0.1", 3306);
    EXPECT_EQ(proxied_mysql_url("mysql://app:pw@127.0.0.1/shop?read_timeout=2s", mysql_proxy),
              "mysql://app:pw@" + mysql_proxy.address() + "/shop?read_timeout=2s");  // default port

    EXPECT_THROW(proxied_redis_url("redis://127.0.0.1:6381", proxy), ConfigError);          // another server
    EXPECT_THROW(proxied_redis_url("redis+cluster://127.0.0.1:6380", proxy), ConfigError);  // redirects
    EXPECT_THROW(proxied_mysql_url("redis://127.0.0.1:6380", proxy), ConfigError);
    EXPECT_THROW(proxied_url("memory:", proxy), ConfigError);

    const auto endpoints =
        url_endpoints("redlock://:pw@127.0.0.1:7001,localhost:7002,127.0.0.3?socket_timeout=1s");
    ASSERT_EQ(endpoints.size(), 3u);
    EXPECT_EQ(endpoints[0].host, "127.0.0.1");
    EXPECT_EQ(endpoints[0].port, 7001);
    EXPECT_EQ(endpoints[1].host, "localhost");
    EXPECT_EQ(endpoints[2].port, 6379);
    EXPECT_THROW(url_endpoints("redis://127.0.0.1:port"), ConfigError);
}

}  // namespace
}  // namespace lockstep
