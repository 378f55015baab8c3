#include "redis_sentinel_router.h"

#include <chrono>
#include <thread>

#include "lockstep/cache/cluster_unavailable_error.h"
#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"
#include "node_address.h"
#include "router_retry.h"

namespace lockstep::detail {
namespace {

using Clock = std::chrono::steady_clock;

// The master no longer accepts writes (demoted) or is cut off: the command did not run.
bool is_demoted(const RedisReply& r) {
    return is_error_reply(r, "READONLY") || is_error_reply(r, "MASTERDOWN");
}

RedisOptions endpoint_options(const RedisOptions& base, const std::string& host, int port) {
    RedisOptions o = base;
    o.topology = RedisTopology::Standalone;
    o.nodes.clear();
    // The address the server announced, or what the client must use instead (address_map).
    const RedisEndpoint target = mapped_address(o, host, port);
    o.host = target.host;
    o.port = target.port;
    // A failover closes clients on the nodes that change role: every lend is checked, so the
    // routing's retry sees a dead connection before a command is sent on it (docs/cache.md).
    o.pool_check_idle_after = std::chrono::milliseconds(0);
    return o;
}

// Sentinels have no data and their own (usually no) password.
RedisOptions sentinel_options(const RedisOptions& base, const RedisEndpoint& sentinel) {
    RedisOptions o = endpoint_options(base, sentinel.host, sentinel.port);
    o.user.clear();
    o.password.clear();
    o.db = 0;
    return o;
}

}  // namespace

RedisSentinelRouter::RedisSentinelRouter(RedisOptions options) : options_(std::move(options)) {
    if (options_.nodes.empty()) throw ConfigError("nodes", "a Sentinel client needs at least one sentinel");
    if (options_.sentinel_master.empty()) throw ConfigError("master name", "missing");
    try {
        rediscover();
    } catch (const ConnectionError& e) {
        // Not fatal: the first command waits for a master (up to failover_wait).
        logger()->warn("redis sentinel: no master yet for '{}': {}", options_.sentinel_master, e.what());
    } catch (const ConfigError& e) {
        // Reported by the first command, as a standalone client reports it (docs/tls.md). No
        // +switch-master subscription: its connections would fail the same way, each after a
        // retry with backoff, and the client is of no use until the configuration is fixed.
        logger()->warn("redis sentinel: '{}': {}", options_.sentinel_master, e.what());
        return;
    }
    watch_switches();
}

RedisSentinelRouter::~RedisSentinelRouter() {
    switch_subscription_.reset();  // before the subscriber and the pools go
}

// +switch-master "<name> <old-ip> <old-port> <new-ip> <new-port>": switch without waiting for an
// error on the old master (which may still accept writes that the new one will never see).
void RedisSentinelRouter::watch_switches() noexcept {
    for (const auto& sentinel : options_.nodes) {
        try {
            auto subscriber = std::make_unique<RedisSubscriber>(sentinel_options(options_, sentinel));
            switch_subscription_ = subscriber->subscribe("+switch-master", [this](std::string_view, std::string_view message) {
                std::vector<std::string> parts;
                std::string word;
                for (char c : message) {
                    if (c == ' ') {
                        parts.push_back(word);
                        word.clear();
                    } else {
                        word.push_back(c);
                    }
                }
                parts.push_back(word);
                if (parts.size() == 5 && parts[0] == options_.sentinel_master) use(parts[3] + ":" + parts[4]);
            });
            sentinel_subscriber_ = std::move(subscriber);
            return;
        } catch (const std::exception& e) {
            logger()->debug("redis sentinel {}:{}: cannot subscribe to +switch-master: {}", sentinel.host, sentinel.port,
                            e.what());
        }
    }
    logger()->warn("redis sentinel: no sentinel took the +switch-master subscription; failovers are noticed on errors");
}

void RedisSentinelRouter::use(const std::string& address) {
    const NodeAddress node = split_address(address);
    bool changed = false;
    {
        WriterMutexLock lock(mutex_);
        if (address == current_address_) return;
        auto& pool = pools_[address];
        if (!pool) {
            pool = std::make_unique<RedisConnectionPool>(endpoint_options(options_, node.host, node.port));
        }
        if (!current_address_.empty()) {
            logger()->warn("redis sentinel: master '{}' moved from {} to {}", options_.sentinel_master,
                           current_address_, address);
        }
        changed = !current_address_.empty();
        current_ = pool.get();
        current_address_ = address;
        switches_.fetch_add(1);
    }
    if (!changed) return;
    std::vector<std::function<void()>> listeners;
    {
        MutexLock lock(listeners_mutex_);
        for (const auto& [id, l] : switch_listeners_) listeners.push_back(l);
    }
    for (const auto& l : listeners) l();
}

std::uint64_t RedisSentinelRouter::add_switch_listener(std::function<void()> listener) {
    MutexLock lock(listeners_mutex_);
    const std::uint64_t id = next_listener_++;
    switch_listeners_.emplace(id, std::move(listener));
    return id;
}

void RedisSentinelRouter::remove_switch_listener(std::uint64_t id) {
    MutexLock lock(listeners_mutex_);
    switch_listeners_.erase(id);
}

void RedisSentinelRouter::rediscover() {
    MutexLock serial(rediscover_mutex_);
    std::string last_error = "no sentinel listed";
    for (const auto& sentinel : options_.nodes) {
        std::string address;
        try {
            RedisConnection conn(sentinel_options(options_, sentinel));
            const RedisReply r = conn.command({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", options_.sentinel_master});
            if (r.type() != RedisReply::Type::Array || r.elements().size() != 2) {
                last_error = sentinel.host + ":" + std::to_string(sentinel.port) + " does not know master '" +
                             options_.sentinel_master + "'";
                continue;
            }
            address = r.elements()[0].str() + ":" + r.elements()[1].str();
            // A sentinel may lag behind a failover: the named node must call itself master.
            const NodeAddress node = split_address(address);
            RedisConnection master(endpoint_options(options_, node.host, node.port));
            const RedisReply role = master.command({"ROLE"});
            if (role.type() != RedisReply::Type::Array || role.elements().empty() || role.elements()[0].str() != "master") {
                last_error = address + " (named by a sentinel) is not a master (yet)";
                continue;
            }
        } catch (const ConfigError&) {
            throw;  // a certificate or a TLS file: no other sentinel or failover fixes it (docs/tls.md)
        } catch (const Error& e) {
            last_error = e.what();
            continue;
        }
        use(address);
        stale_.store(false);
        return;
    }
    throw ConnectionError("no sentinel named a reachable master '" + options_.sentinel_master + "': " + last_error);
}

RedisConnectionPool& RedisSentinelRouter::current_pool() {
    if (stale_.load(std::memory_order_relaxed)) {
        try {
            rediscover();
        } catch (const ConnectionError&) {
            // fall through: the caller retries or reports
        }
    }
    ReaderMutexLock lock(mutex_);
    if (current_ == nullptr) throw ConnectionError("no master known for '" + options_.sentinel_master + "'");
    return *current_;
}

void RedisSentinelRouter::unavailable(const std::string& why) const {
    throw ClusterUnavailableError("Redis master '" + options_.sentinel_master + "' unavailable for " +
                                  std::to_string(options_.failover_wait.count()) + " ms (failover_wait): " + why);
}

RedisReply RedisSentinelRouter::run(const std::function<RedisReply(RedisConnection&)>& call) {
    const auto deadline = Clock::now() + options_.failover_wait;
    for (int attempt = 0;; ++attempt) {
        std::optional<PooledRedisConnection> conn;
        try {
            conn.emplace(current_pool().acquire());
        } catch (const ConnectionError& e) {
            if (Clock::now() > deadline) unavailable(e.what());
            stale_.store(true);
            back_off_before_retry(attempt);
            continue;
        }
        RedisReply reply;
        try {
            reply = call(**conn);
        } catch (const ConnectionError&) {
            stale_.store(true);
            throw;
        }
        if (is_demoted(reply)) {
            if (Clock::now() > deadline) unavailable(reply.error_message());
            stale_.store(true);
            back_off_before_retry(attempt);
            continue;
        }
        return reply;
    }
}

std::vector<RedisReply> RedisSentinelRouter::pipeline(const std::vector<std::vector<std::string>>& commands) {
    std::vector<RedisReply> replies;
    run([&](RedisConnection& c) {
        replies = c.pipeline(commands);
        // A demoted master refuses the writes of the batch but may have answered its reads:
        // the whole batch is sent again to the new master only if every reply is a refusal.
        for (const auto& r : replies) {
            if (!is_demoted(r)) return RedisReply::status("OK");
        }
        return replies.empty() ? RedisReply::status("OK") : replies.front();
    });
    return replies;
}

PooledRedisConnection RedisSentinelRouter::connection() {
    const auto deadline = Clock::now() + options_.failover_wait;
    for (int attempt = 0;; ++attempt) {
        try {
            return current_pool().acquire();
        } catch (const ConnectionError& e) {
            if (Clock::now() > deadline) unavailable(e.what());
        }
        stale_.store(true);
        back_off_before_retry(attempt);
    }
}

RedisPoolStats RedisSentinelRouter::stats() const {
    ReaderMutexLock lock(mutex_);
    return current_ ? current_->stats() : RedisPoolStats{};
}

std::string RedisSentinelRouter::master() {
    current_pool();
    ReaderMutexLock lock(mutex_);
    return current_address_;
}

RedisOptions RedisSentinelRouter::master_options() {
    const std::string address = master();
    if (address.empty()) return endpoint_options(options_, options_.host, options_.port);
    const NodeAddress node = split_address(address);
    return endpoint_options(options_, node.host, node.port);
}

std::optional<RedisOptions> RedisSentinelRouter::known_master_options() const {
    ReaderMutexLock lock(mutex_);
    if (current_address_.empty()) return std::nullopt;
    const NodeAddress node = split_address(current_address_);
    return endpoint_options(options_, node.host, node.port);
}

}  // namespace lockstep::detail
