#include "redlock_masters.h"

#include "lockstep/core/error.h"

namespace lockstep::redlock_detail {

RedlockMasters::RedlockMasters(const std::vector<RedisOptions>& masters, bool parallel) : parallel_(parallel) {
    for (const auto& m : masters) clients_.push_back(std::make_unique<RedisClient>(m));
}

namespace {

std::vector<std::string> command_of(const std::string& verb, const std::string& body,
                                    const std::vector<std::string>& keys, const std::vector<std::string>& args) {
    std::vector<std::string> c{verb, body, std::to_string(keys.size())};
    c.insert(c.end(), keys.begin(), keys.end());
    c.insert(c.end(), args.begin(), args.end());
    return c;
}

bool is_noscript(const RedisReply& r) { return r.is_error() && r.error_message().rfind("NOSCRIPT", 0) == 0; }

}  // namespace

std::vector<MasterReply> RedlockMasters::eval(const RedisScript& script, const std::vector<std::string>& keys,
                                              const std::vector<std::string>& args, const std::vector<bool>& only) {
    const std::size_t n = clients_.size();
    std::vector<MasterReply> out(n);
    std::vector<std::optional<PooledRedisConnection>> conns(n);
    // Built once for all masters (each send_pipeline only reads it).
    const std::vector<std::vector<std::string>> evalsha{command_of("EVALSHA", script.sha1(), keys, args)};

    // Reads master i's reply; a restarted master answers NOSCRIPT once, then gets the source.
    auto collect = [&](std::size_t i) {
        try {
            RedisReply r = std::move(conns[i].value()->receive_pipeline().front());
            if (is_noscript(r)) r = conns[i].value()->command(command_of("EVAL", script.source(), keys, args));
            if (r.is_error()) {
                out[i].error = r.error_message();
            } else {
                out[i].reply = std::move(r);
            }
        } catch (const Error& e) {
            out[i].error = e.what();
        }
        conns[i].reset();  // back to the pool (or discarded when broken)
    };

    for (std::size_t i = 0; i < n; ++i) {
        if (!only.empty() && !only[i]) continue;
        try {
            conns[i].emplace(clients_[i]->connection());
            conns[i].value()->send_pipeline(evalsha);
        } catch (const Error& e) {
            out[i].error = e.what();
            conns[i].reset();
            continue;
        }
        if (!parallel_) collect(i);
    }
    if (parallel_) {
        for (std::size_t i = 0; i < n; ++i) {
            if (conns[i]) collect(i);
        }
    }
    return out;
}

}  // namespace lockstep::redlock_detail
