#include "signals.h"

#include <algorithm>
#include <cstdio>

#include "lockstep/cache/redis_client.h"

namespace lockstep::demo {

namespace {
constexpr const char* kKeyTtlMs = "60000";
}

Signals::Signals(RedisOptions redis, std::string prefix, std::size_t connections) : prefix_(std::move(prefix)) {
    redis.socket_timeout = std::chrono::seconds(15);
    // Every waiting actor holds a connection in BLPOP: room for all of them (opened lazily).
    redis.pool_size = std::max<std::size_t>(connections, 128);
    redis.pool_wait_timeout = std::chrono::seconds(30);
    redis_ = std::make_unique<RedisClient>(redis);
}

Signals::~Signals() = default;

std::string Signals::key(const std::string& name) const { return prefix_ + "sig:" + name; }

void Signals::post(const std::string& name, int count) {
    if (count <= 0) return;
    std::vector<std::string> push = {"RPUSH", key(name)};
    for (int i = 0; i < count; ++i) push.push_back("1");
    redis_->pipeline({push, {"PEXPIRE", key(name), kKeyTtlMs}});
}

bool Signals::wait(const std::string& name, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return false;
        // BLPOP takes fractional seconds; wait in slices shorter than the socket timeout.
        auto slice = std::min<long long>(left.count(), 5000);
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%.3f", static_cast<double>(slice) / 1000.0);
        auto reply = redis_->command({"BLPOP", key(name), seconds});
        if (!reply.is_nil()) return true;
    }
}

bool Signals::rendezvous(const std::string& name, int parties, std::chrono::milliseconds timeout) {
    auto replies = redis_->pipeline({{"INCR", key(name + ":n")}, {"PEXPIRE", key(name + ":n"), kKeyTtlMs}});
    long long arrived = replies[0].throw_if_error().integer();
    if (arrived == parties) {
        post(name + ":go", parties - 1);
        return true;
    }
    if (arrived > parties) return true;  // everyone had arrived (a late party after a timeout)
    return wait(name + ":go", timeout);
}

long long Signals::add(const std::string& name, long long by) {
    auto replies = redis_->pipeline(
        {{"INCRBY", key(name), std::to_string(by)}, {"PEXPIRE", key(name), kKeyTtlMs}});
    return replies[0].throw_if_error().integer();
}

void Signals::put(const std::string& name, const std::string& value) {
    redis_->set(key(name), value, std::chrono::milliseconds(60000));
}

std::optional<std::string> Signals::get(const std::string& name) { return redis_->get(key(name)); }

}  // namespace lockstep::demo
