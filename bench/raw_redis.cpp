#include "raw_redis.h"

#include <sstream>
#include <string>
#include <vector>

#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"

namespace lockstep::bench {

RawRedis::RawRedis(const RedisOptions& options) {
    timeval tv{};
    tv.tv_sec = options.connect_timeout.count() / 1000;
    tv.tv_usec = (options.connect_timeout.count() % 1000) * 1000;
    ctx_.reset(redisConnectWithTimeout(options.host.c_str(), options.port, tv));
    if (!ctx_ || ctx_->err) {
        throw ConnectionError("raw hiredis connect to " + options.host + ":" + std::to_string(options.port) +
                              ": " + (ctx_ ? ctx_->errstr : "out of memory"));
    }
    if (!options.password.empty()) {
        if (options.user.empty()) {
            command({"AUTH", options.password});
        } else {
            command({"AUTH", options.user, options.password});
        }
    }
    if (options.db != 0) command({"SELECT", std::to_string(options.db)});
}

namespace {

// `options` pointed at one "host:port" (as CLUSTER NODES and cluster_master_of write it; the
// port follows the last ':', so an IPv6 host keeps its colons).
RedisOptions at_address(RedisOptions options, const std::string& address) {
    const auto colon = address.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == address.size())
        throw ProtocolError("raw hiredis: not a host:port address: '" + address + "'");
    options.host = address.substr(0, colon);
    if (options.host.size() > 2 && options.host.front() == '[' && options.host.back() == ']')
        options.host = options.host.substr(1, options.host.size() - 2);
    try {
        options.port = std::stoi(address.substr(colon + 1));
    } catch (const std::exception&) {
        throw ProtocolError("raw hiredis: bad port in '" + address + "'");
    }
    options.topology = RedisTopology::Standalone;
    options.nodes.clear();
    options.sentinel_master.clear();
    return options;
}

}  // namespace

RedisOptions raw_options_for_key(RedisClient& client, std::string_view key) {
    const RedisOptions& o = client.options();
    switch (o.topology) {
        case RedisTopology::Standalone:
            return o;
        case RedisTopology::Cluster:
            return at_address(o, client.cluster_master_of(key));
        case RedisTopology::Sentinel:
            return at_address(o, client.sentinel_master());
    }
    return o;
}

std::vector<RedisOptions> raw_master_options(RedisClient& client) {
    const RedisOptions& o = client.options();
    if (o.topology != RedisTopology::Cluster) return {raw_options_for_key(client, "")};
    // "<id> <ip:port@cport[,hostname]> <flags> <master> <ping> <pong> <epoch> <state> <slots>..."
    std::vector<RedisOptions> out;
    std::istringstream lines(client.command({"CLUSTER", "NODES"}).str());
    std::string line;
    while (std::getline(lines, line)) {
        std::istringstream fields(line);
        std::string id, address, flags;
        if (!(fields >> id >> address >> flags)) continue;
        if (flags.find("master") == std::string::npos || flags.find("fail") != std::string::npos) continue;
        out.push_back(at_address(o, address.substr(0, address.find('@'))));
    }
    if (out.empty()) throw ProtocolError("raw hiredis: CLUSTER NODES named no master");
    return out;
}

ReplyPtr RawRedis::command(std::initializer_list<std::string_view> args) {
    // Fixed-size arrays on the stack: the baseline pays no allocation of its own.
    const char* argv[16];
    size_t lens[16];
    int argc = 0;
    for (auto a : args) {
        if (argc == 16) throw ConfigError("raw command", "at most 16 arguments");
        argv[argc] = a.data();
        lens[argc] = a.size();
        ++argc;
    }
    ReplyPtr reply(static_cast<redisReply*>(redisCommandArgv(ctx_.get(), argc, argv, lens)));
    if (!reply) throw ProtocolError(std::string("raw hiredis: ") + ctx_->errstr);
    if (reply->type == REDIS_REPLY_ERROR)
        throw ProtocolError("raw hiredis: " + std::string(reply->str, reply->len));
    return reply;
}

}  // namespace lockstep::bench
