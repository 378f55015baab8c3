#include "lockstep/cache/redis_client.h"

#include "hiredis_io.h"
#include "lockstep/core/error.h"
#include "lockstep/core/mutex.h"
#include "redis_options_check.h"

namespace lockstep {

struct RedisClient::Impl {
    explicit Impl(RedisOptions o) : options(std::move(o)), pool(options) {}

    const RedisOptions options;
    RedisConnectionPool pool;
    Mutex subscriber_mutex;
    std::unique_ptr<RedisSubscriber> subscriber GUARDED_BY(subscriber_mutex);  // created on first use
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

bool starts_with(std::string_view text, std::string_view prefix) {
    return text.substr(0, prefix.size()) == prefix;
}

}  // namespace

RedisClient::RedisClient(RedisOptions options) {
    detail::check_redis_options(options);
    impl_ = std::make_unique<Impl>(std::move(options));
}

RedisClient::~RedisClient() = default;

const RedisOptions& RedisClient::options() const noexcept {
    return impl_->options;
}

RedisReply RedisClient::command(std::initializer_list<std::string_view> args) {
    if (args.size() == 0) throw ConfigError("command", "a Redis command needs at least its name");
    auto conn = impl_->pool.acquire();
    return checked(conn->command(args), *args.begin());
}

RedisReply RedisClient::command(const std::vector<std::string>& args) {
    if (args.empty()) throw ConfigError("command", "a Redis command needs at least its name");
    auto conn = impl_->pool.acquire();
    return checked(conn->command(args), args.front());
}

std::vector<RedisReply> RedisClient::pipeline(const std::vector<std::vector<std::string>>& commands) {
    if (commands.empty()) return {};
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

    auto conn = impl_->pool.acquire();
    RedisReply reply = conn->command(evalsha);
    // NOSCRIPT means the script did not run (SCRIPT FLUSH, a restarted or new server), so
    // loading it and running it once more cannot apply it twice.
    if (reply.is_error() && starts_with(reply.error_message(), "NOSCRIPT")) {
        const RedisReply loaded = checked(conn->command({"SCRIPT", "LOAD", script.source()}), "SCRIPT LOAD");
        if (loaded.type() != RedisReply::Type::String || loaded.str() != script.sha1()) {
            throw ProtocolError("SCRIPT LOAD answered a " + std::string(loaded.type_name()) +
                                " other than the local digest " + script.sha1());
        }
        reply = conn->command(evalsha);
    }
    if (reply.is_error())
        throw ProtocolError("Redis script " + script.sha1() + " failed: " + reply.error_message());
    return reply;
}

std::optional<std::string> RedisClient::get(std::string_view key) {
    return command({"GET", key}).optional_string();
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
    std::vector<std::string> args;
    args.reserve(keys.size() + 1);
    args.emplace_back("DEL");
    args.insert(args.end(), keys.begin(), keys.end());
    return command(args).integer();
}

long long RedisClient::publish(std::string_view channel, std::string_view message) {
    return command({"PUBLISH", channel, message}).integer();
}

PooledRedisConnection RedisClient::connection() {
    return impl_->pool.acquire();
}

RedisPoolStats RedisClient::pool_stats() const {
    return impl_->pool.stats();
}

RedisSubscriber& RedisClient::subscriber() {
    Impl& m = *impl_;
    MutexLock lock(m.subscriber_mutex);
    if (!m.subscriber) m.subscriber = std::make_unique<RedisSubscriber>(m.options);
    return *m.subscriber;
}

}  // namespace lockstep
