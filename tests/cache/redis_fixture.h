// Shared helpers of the cache tests: a fixture with a RedisClient on the test binary's private
// Redis and a key prefix unique to the test, deleted before and after; a few sockets that never
// answer; a stopwatch; a thread-safe inbox for pub/sub messages.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"
#include "eventually.h"  // eventually(...): polls the server's view of a client
#include "test_servers.h"

namespace lockstep::test {

using namespace std::chrono_literals;

// Deletes every key under `prefix` (SCAN, not KEYS: it does not block the server).
inline void delete_keys_with_prefix(RedisClient& client, const std::string& prefix) {
    std::string cursor = "0";
    do {
        RedisReply page = client.command({"SCAN", cursor, "MATCH", prefix + "*", "COUNT", "1000"});
        cursor = page.elements().at(0).str();
        std::vector<std::string> keys;
        for (const auto& k : page.elements().at(1).elements()) keys.push_back(k.str());
        client.del(keys);
    } while (cursor != "0");
}

class RedisTest : public ::testing::Test {
protected:
    void SetUp() override {
        options_ = servers().redis_options();
        prefix_ = unique_prefix();
        // The fixture's own client (setup, cleanup, CLIENT KILL) checks every lend: the restart
        // tests close its pooled connection and its cleanup must not see that as an error. The
        // clients under test use options_, with the default window (docs/cache.md).
        RedisOptions helper = options_;
        helper.pool_check_idle_after = std::chrono::milliseconds(0);
        client_ = std::make_unique<RedisClient>(helper);
        delete_keys_with_prefix(*client_, prefix_);
    }
    void TearDown() override {
        try {
            delete_keys_with_prefix(*client_, prefix_);
        } catch (const std::exception& e) {
            ADD_FAILURE() << "cleaning up keys failed: " << e.what();
        }
    }

    std::string key(const std::string& name) const { return prefix_ + name; }
    // Options of the private server with other settings, for a second client.
    RedisOptions options_with(const std::function<void(RedisOptions&)>& change) const {
        RedisOptions o = options_;
        change(o);
        return o;
    }

    RedisOptions options_;
    std::string prefix_;
    std::unique_ptr<RedisClient> client_;
};

class Stopwatch {
public:
    std::chrono::milliseconds elapsed() const {
        return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                     start_);
    }

private:
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// A loopback TCP listener that never accepts and never answers. With a roomy backlog the
// kernel completes connects to it (so reads time out); `fill_backlog()` makes further connects
// hang in SYN retries (so connects time out).
class SilentListener {
public:
    explicit SilentListener(int backlog = 16) {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        addr.sin_port = 0;
        if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
            ::listen(fd_, backlog) != 0) {
            throw std::runtime_error("cannot open a loopback listener");
        }
        socklen_t len = sizeof addr;
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
        port_ = ntohs(addr.sin_port);
    }
    ~SilentListener() {
        for (int fd : fillers_) ::close(fd);
        ::close(fd_);
    }
    SilentListener(const SilentListener&) = delete;
    SilentListener& operator=(const SilentListener&) = delete;

    int port() const { return port_; }

    void fill_backlog(int connections = 8) {
        for (int i = 0; i < connections; ++i) {
            int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
            sockaddr_in addr{};
            addr.sin_family = AF_INET;
            addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            addr.sin_port = htons(static_cast<uint16_t>(port_));
            ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);  // EINPROGRESS is fine
            fillers_.push_back(fd);
        }
    }

private:
    int fd_ = -1;
    int port_ = 0;
    std::vector<int> fillers_;
};

// A loopback port nobody listens on (connects are refused at once).
inline int refused_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    ::close(fd);
    return ntohs(addr.sin_port);
}

// Messages received by subscriber callbacks, with a bounded wait for the n-th one.
class Inbox {
public:
    RedisSubscriber::Callback callback() {
        return [this](std::string_view channel, std::string_view message) {
            {
                std::lock_guard<std::mutex> lock(mutex_);
                messages_.emplace_back(std::string(channel), std::string(message));
            }
            cv_.notify_all();
        };
    }
    bool wait_for(std::size_t count, std::chrono::milliseconds timeout = 5s) {
        std::unique_lock<std::mutex> lock(mutex_);
        return cv_.wait_for(lock, timeout, [&] { return messages_.size() >= count; });
    }
    std::vector<std::pair<std::string, std::string>> messages() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return messages_;
    }
    std::vector<std::string> payloads() const {
        std::vector<std::string> out;
        for (const auto& m : messages()) out.push_back(m.second);
        return out;
    }

private:
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    std::vector<std::pair<std::string, std::string>> messages_;
};

// An INFO field as an integer, e.g. info_field(client, "stats", "total_reads_processed").
inline long long info_field(RedisClient& client, const std::string& section, const std::string& field) {
    const std::string info = client.command({"INFO", section}).str();
    const auto at = info.find(field + ":");
    if (at == std::string::npos) return -1;
    return std::stoll(info.substr(at + field.size() + 1));
}

}  // namespace lockstep::test
