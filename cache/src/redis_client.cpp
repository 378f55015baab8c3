#include "lockstep/cache/redis_client.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>

#include "hiredis_io.h"
#include "lockstep/core/error.h"
#include "lockstep/core/mutex.h"
#include "redis_cluster_router.h"
#include "redis_sentinel_router.h"
#include "redis_options_check.h"
#include "router_retry.h"
#include "tls_session.h"

namespace lockstep {

struct RedisClient::Impl {
    explicit Impl(RedisOptions o) : options(std::move(o)), pool(options) {
        if (options.topology == RedisTopology::Cluster) cluster = std::make_unique<detail::RedisClusterRouter>(options);
        if (options.topology == RedisTopology::Sentinel) sentinel = std::make_unique<detail::RedisSentinelRouter>(options);
    }

    const RedisOptions options;
    RedisConnectionPool pool;  // Standalone: the server; Cluster: unused (connections are lazy)
    std::unique_ptr<detail::RedisClusterRouter> cluster;  // set for redis+cluster:// only
    std::unique_ptr<detail::RedisSentinelRouter> sentinel;  // set for redis+sentinel:// only
    Mutex subscriber_mutex;
    std::unique_ptr<RedisSubscriber> subscriber GUARDED_BY(subscriber_mutex);  // created on first use
    std::uint64_t subscriber_switch_listener GUARDED_BY(subscriber_mutex) = 0;  // Sentinel: relocate()

    ~Impl() {
        MutexLock lock(subscriber_mutex);
        if (sentinel && subscriber_switch_listener != 0) sentinel->remove_switch_listener(subscriber_switch_listener);
    }
};

namespace {

// An error reply from `command` becomes a ProtocolError naming the command (not its arguments,
// which are data) and keeping the server's message verbatim.
RedisReply checked(RedisReply reply, std::string_view command_name) {
    if (reply.is_error()) {
        throw ProtocolError("Redis replied to " + detail::printable(command_name, 32) +
                            " with an error: " + reply.error_message());
    }
    return reply;
}

// EVALSHA on one connection; NOSCRIPT means the script did not run (SCRIPT FLUSH, a restarted or
// new server, a cluster node that never saw it), so loading it there and running it once more
// cannot apply it twice. In a cluster this runs on the master of the script's first key, so each
// node learns each script on first use.
// `Args`: a std::vector<std::string>, or a span of views (RedisClient::eval without copies).
template <class Args>
RedisReply evalsha_on(RedisConnection& conn, const RedisScript& script, const Args& evalsha) {
    RedisReply reply = conn.command(evalsha);
    if (detail::is_error_reply(reply, "NOSCRIPT")) {
        const RedisReply loaded = checked(conn.command({"SCRIPT", "LOAD", script.source()}), "SCRIPT LOAD");
        if (loaded.type() != RedisReply::Type::String || loaded.str() != script.sha1()) {
            throw ProtocolError("SCRIPT LOAD answered a " + std::string(loaded.type_name()) +
                                " other than the local digest " + script.sha1());
        }
        reply = conn.command(evalsha);
    }
    return reply;
}

bool is_script_management(const std::vector<std::string>& args) {
    auto upper = [](std::string s) {
        for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        return s;
    };
    return args.size() >= 2 && upper(args[0]) == "SCRIPT" && (upper(args[1]) == "LOAD" || upper(args[1]) == "FLUSH");
}

}  // namespace

RedisClient::RedisClient(RedisOptions options) {
    detail::check_redis_options(options);
    // One SSL_CTX for every connection the client opens (pools, routers, subscribers).
    detail::share_tls_context(options);
    impl_ = std::make_unique<Impl>(std::move(options));
}

RedisClient::~RedisClient() = default;

const RedisOptions& RedisClient::options() const noexcept {
    return impl_->options;
}

RedisReply RedisClient::command(std::initializer_list<std::string_view> args) {
    if (args.size() == 0) throw ConfigError("command", "a Redis command needs at least its name");
    if (impl_->cluster || impl_->sentinel) return command(std::vector<std::string>(args.begin(), args.end()));
    auto conn = impl_->pool.acquire();
    return checked(conn->command(args), *args.begin());
}

RedisReply RedisClient::command(const std::vector<std::string>& args) {
    if (args.empty()) throw ConfigError("command", "a Redis command needs at least its name");
    if (impl_->cluster && is_script_management(args)) {
        // Scripts live per node: SCRIPT LOAD / FLUSH go to every master (each answers the same).
        RedisReply last;
        for (auto& r : impl_->cluster->on_every_master(args)) last = checked(std::move(r), args.front());
        return last;
    }
    if (impl_->cluster) {
        return checked(impl_->cluster->run(redis_command_slot(args), [&](RedisConnection& c) { return c.command(args); }),
                       args.front());
    }
    if (impl_->sentinel) return checked(impl_->sentinel->run([&](RedisConnection& c) { return c.command(args); }), args.front());
    auto conn = impl_->pool.acquire();
    return checked(conn->command(args), args.front());
}

std::vector<RedisReply> RedisClient::pipeline(const std::vector<std::vector<std::string>>& commands) {
    if (commands.empty()) return {};
    if (impl_->cluster) return impl_->cluster->pipeline(commands);
    if (impl_->sentinel) return impl_->sentinel->pipeline(commands);
    auto conn = impl_->pool.acquire();
    return conn->pipeline(commands);
}

RedisReply RedisClient::eval(const RedisScript& script, const std::vector<std::string>& keys,
                             const std::vector<std::string>& args) {
    std::vector<std::string> evalsha;
    evalsha.reserve(3 + keys.size() + args.size());
    evalsha.emplace_back("EVALSHA");
    evalsha.push_back(script.sha1());
    evalsha.push_back(std::to_string(keys.size()));
    evalsha.insert(evalsha.end(), keys.begin(), keys.end());
    evalsha.insert(evalsha.end(), args.begin(), args.end());

    RedisReply reply;
    if (impl_->cluster) {
        const std::optional<int> slot = keys.empty() ? std::nullopt : std::optional<int>(redis_cluster_slot(keys.front()));
        reply = impl_->cluster->run(slot, [&](RedisConnection& c) { return evalsha_on(c, script, evalsha); });
    } else if (impl_->sentinel) {
        reply = impl_->sentinel->run([&](RedisConnection& c) { return evalsha_on(c, script, evalsha); });
    } else {
        auto conn = impl_->pool.acquire();
        reply = evalsha_on(*conn, script, evalsha);
    }
    if (reply.is_error())
        throw ProtocolError("Redis script " + script.sha1() + " failed: " + reply.error_message());
    return reply;
}

RedisReply RedisClient::eval_views(const RedisScript& script, std::span<const std::string_view> keys,
                                   std::span<const std::string_view> args) {
    if (impl_->sentinel) {
        return eval(script, std::vector<std::string>(keys.begin(), keys.end()),
                    std::vector<std::string>(args.begin(), args.end()));
    }
    // Standalone and Cluster: the command's argv points into the caller's strings; nothing is
    // copied (on a cluster it is routed by its first key, as eval() routes).
    constexpr std::size_t kInline = 24;
    std::array<std::string_view, kInline> inline_argv;
    std::vector<std::string_view> heap_argv;
    const std::size_t n = 3 + keys.size() + args.size();
    std::span<std::string_view> argv(inline_argv.data(), n);
    if (n > kInline) {
        heap_argv.resize(n);
        argv = std::span<std::string_view>(heap_argv);
    }
    char numkeys[24];
    const auto len = std::snprintf(numkeys, sizeof numkeys, "%zu", keys.size());
    argv[0] = "EVALSHA";
    argv[1] = script.sha1();
    argv[2] = std::string_view(numkeys, static_cast<std::size_t>(len));
    std::copy(keys.begin(), keys.end(), argv.begin() + 3);
    std::copy(args.begin(), args.end(), argv.begin() + 3 + static_cast<std::ptrdiff_t>(keys.size()));

    const std::span<const std::string_view> evalsha(argv);
    RedisReply reply;
    if (impl_->cluster) {
        const std::optional<int> slot = keys.empty() ? std::nullopt : std::optional<int>(redis_cluster_slot(keys.front()));
        reply = impl_->cluster->run(slot, [&](RedisConnection& c) { return evalsha_on(c, script, evalsha); });
    } else {
        auto conn = impl_->pool.acquire();
        reply = evalsha_on(*conn, script, evalsha);
    }
    if (reply.is_error())
        throw ProtocolError("Redis script " + script.sha1() + " failed: " + reply.error_message());
    return reply;
}

std::optional<std::string> RedisClient::get(std::string_view key) {
    if (impl_->cluster) {
        // The routed hit: the key's slot, the slot's pool, the GET with the caller's key (no copy
        // into a std::vector<std::string>), lent as a read (unchecked when returned recently,
        // once more on a checked lend after a ConnectionError: redis_cluster_router.h).
        return checked(impl_->cluster->run(
                           redis_cluster_slot(key), [&](RedisConnection& c) { return c.command({"GET", key}); },
                           detail::RedisClusterRouter::Call::Read),
                       "GET")
            .optional_string();
    }
    if (impl_->sentinel) return command({"GET", key}).optional_string();
    bool unchecked = false;
    try {
        auto conn = impl_->pool.acquire();
        unchecked = conn.lent_unchecked();
        return checked(conn->command({"GET", key}), "GET").optional_string();
    } catch (const TimeoutError&) {
        throw;  // a server that does not answer is not asked twice
    } catch (const ConnectionError&) {
        // The connection was lent without the liveness check (it was returned a moment ago)
        // and the server had closed it meanwhile. A GET changes nothing, so it runs once more,
        // on a connection checked now (the failed one is already discarded). Writes are never
        // repeated: they report "may have been applied" instead (docs/cache.md).
        if (!unchecked) throw;
    }
    auto conn = impl_->pool.acquire(RedisConnectionPool::Lend::Checked);
    return checked(conn->command({"GET", key}), "GET").optional_string();
}

void RedisClient::set(std::string_view key, std::string_view value,
                      std::optional<std::chrono::milliseconds> ttl) {
    RedisReply reply;
    if (ttl) {
        // Redis would refuse these too, but as a ProtocolError long after the caller's mistake.
        if (ttl->count() <= 0)
            throw ConfigError("ttl", "must be positive, got " + std::to_string(ttl->count()) + "ms");
        const std::string px = std::to_string(ttl->count());
        reply = command({"SET", key, value, "PX", px});
    } else {
        reply = command({"SET", key, value});
    }
    if (reply.type() != RedisReply::Type::Status || reply.str() != "OK") {
        throw ProtocolError("SET answered " + std::string(reply.type_name()) + " instead of OK");
    }
}

long long RedisClient::del(const std::vector<std::string>& keys) {
    if (keys.empty()) return 0;
    if (impl_->cluster && keys.size() > 1) {
        // Keys of different slots live on different masters: one DEL per key, one round trip
        // per master (a DEL of several keys was never atomic for the cache layer's callers).
        std::vector<std::vector<std::string>> dels;
        dels.reserve(keys.size());
        for (const auto& k : keys) dels.push_back({"DEL", k});
        long long n = 0;
        for (const auto& r : pipeline(dels)) n += r.throw_if_error().integer();
        return n;
    }
    std::vector<std::string> args;
    args.reserve(keys.size() + 1);
    args.emplace_back("DEL");
    args.insert(args.end(), keys.begin(), keys.end());
    return command(args).integer();
}

long long RedisClient::publish(std::string_view channel, std::string_view message) {
    // Sharded, as subscriber() listens: on a cluster it runs on the channel's shard only.
    return command({"SPUBLISH", channel, message}).integer();
}

PooledRedisConnection RedisClient::connection() {
    if (impl_->cluster) return impl_->cluster->connection(std::nullopt);
    if (impl_->sentinel) return impl_->sentinel->connection();
    return impl_->pool.acquire();
}

PooledRedisConnection RedisClient::connection_for_key(std::string_view key) {
    if (impl_->cluster) return impl_->cluster->connection(redis_cluster_slot(key));
    if (impl_->sentinel) return impl_->sentinel->connection();
    return impl_->pool.acquire();
}

RedisPoolStats RedisClient::pool_stats() const {
    if (impl_->cluster) return impl_->cluster->stats();
    if (impl_->sentinel) return impl_->sentinel->stats();
    return impl_->pool.stats();
}

std::string RedisClient::cluster_master_of(std::string_view key) {
    if (!impl_->cluster) return {};
    return impl_->cluster->master_of(redis_cluster_slot(key));
}

void RedisClient::refresh_topology() {
    if (impl_->cluster) impl_->cluster->refresh();
    if (impl_->sentinel) impl_->sentinel->rediscover();
}

std::string RedisClient::sentinel_master() {
    return impl_->sentinel ? impl_->sentinel->master() : std::string{};
}

std::uint64_t RedisClient::add_master_change_listener(std::function<void(const RedisMasterChange&)> listener) {
    if (impl_->cluster) return impl_->cluster->add_master_change_listener(std::move(listener));
    if (!impl_->sentinel) return 0;
    return impl_->sentinel->add_switch_listener([listener = std::move(listener)] { listener(RedisMasterChange{}); });
}

void RedisClient::remove_master_change_listener(std::uint64_t id) {
    if (id == 0) return;
    if (impl_->cluster) impl_->cluster->remove_master_change_listener(id);
    if (impl_->sentinel) impl_->sentinel->remove_switch_listener(id);
}

RedisSubscriber& RedisClient::subscriber() {
    Impl& m = *impl_;
    MutexLock lock(m.subscriber_mutex);
    if (m.subscriber) return *m.subscriber;
    // Sharded channels everywhere (the lock scripts SPUBLISH): on a cluster a release message
    // stays on the shard owning the lock's slot instead of crossing the whole cluster bus.
    using Channels = RedisSubscriber::Channels;
    if (m.cluster) {
        // Each channel on the master of its slot (the channels carry the lock's hash tag: the
        // same slot as the keys whose script publishes). After a broken connection the map is
        // asked again, so a promoted replica is found.
        detail::RedisClusterRouter* router = m.cluster.get();
        m.subscriber = std::make_unique<RedisSubscriber>(
            m.options, Channels::Sharded, [router](std::string_view channel, bool refresh) {
                if (refresh) router->refresh();
                return router->master_options(redis_cluster_slot(channel));
            });
    } else if (m.sentinel) {
        // SPUBLISH is not replicated outside cluster mode: the subscriber follows the master
        // (re-asked after a broken connection, moved at once on +switch-master).
        detail::RedisSentinelRouter* router = m.sentinel.get();
        m.subscriber = std::make_unique<RedisSubscriber>(
            router->master_options(), Channels::Sharded, [router](std::string_view, bool refresh) {
                if (refresh) router->rediscover();
                return router->master_options();
            });
        RedisSubscriber* sub = m.subscriber.get();
        m.subscriber_switch_listener = router->add_switch_listener([sub] { sub->relocate(); });
    } else {
        m.subscriber = std::make_unique<RedisSubscriber>(m.options, Channels::Sharded);
    }
    return *m.subscriber;
}

}  // namespace lockstep
