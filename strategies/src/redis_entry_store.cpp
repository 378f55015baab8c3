// EntryStore over Redis: GET/SET/DEL, and the scripts of entry_scripts.h for the conditional
// operations. Batches are pipelines of single-key commands (one round trip, cluster-legal:
// no multi-key command such as MGET, whose keys would have to share one slot).
#include <string>
#include <vector>

#include "entry_scripts.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"
#include "lockstep/strategies/entry_store.h"

namespace lockstep {

namespace {

bool is_noscript(const RedisReply& r) {
    return r.is_error() && r.error_message().rfind("NOSCRIPT", 0) == 0;
}

FillOutcome to_outcome(long long code) {
    switch (code) {
        case 1: return FillOutcome::Stored;
        case 2: return FillOutcome::Unchanged;
        case 0: return FillOutcome::Refused;
        case 3: return FillOutcome::Cleared;
        default: throw ProtocolError("fill script returned " + std::to_string(code));
    }
}

Claim to_claim(const RedisReply& r) {
    const auto& e = r.elements();
    if (e.empty()) throw ProtocolError("claim script returned an empty array");
    switch (e[0].integer()) {
        case 1: return Claim{Claim::Result::Claimed, {}};
        case 2: return Claim{Claim::Result::Busy, {}};
        case 3:
            if (e.size() < 2) throw ProtocolError("claim script returned 'present' without the entry");
            return Claim{Claim::Result::Present, e[1].str()};
        default: throw ProtocolError("claim script returned " + std::to_string(e[0].integer()));
    }
}

class RedisEntryStore final : public EntryStore {
public:
    explicit RedisEntryStore(RedisClient& client) : client_(client) {}

    std::optional<std::string> get(const std::string& key) override { return client_.get(key); }

    std::vector<std::optional<std::string>> get_many(const std::vector<std::string>& keys) override {
        std::vector<std::vector<std::string>> commands;
        commands.reserve(keys.size());
        for (const auto& k : keys) commands.push_back({"GET", k});
        auto replies = commands.empty() ? std::vector<RedisReply>{} : client_.pipeline(commands);
        std::vector<std::optional<std::string>> out;
        out.reserve(replies.size());
        for (const auto& r : replies) out.push_back(r.throw_if_error().optional_string());
        return out;
    }

    Claim claim(const std::string& key, const std::string& marker, std::chrono::milliseconds ttl) override {
        return to_claim(client_.eval(entry_scripts::claim(), {key}, {marker, std::to_string(ttl.count())}));
    }

    std::vector<Claim> claim_many(const std::vector<std::string>& keys, const std::vector<std::string>& markers,
                                  std::chrono::milliseconds ttl) override {
        std::vector<Call> calls;
        for (std::size_t i = 0; i < keys.size(); ++i) calls.push_back({keys[i], {markers[i], std::to_string(ttl.count())}});
        auto replies = eval_many(entry_scripts::claim(), calls);
        std::vector<Claim> out;
        for (const auto& r : replies) out.push_back(to_claim(r.throw_if_error()));
        return out;
    }

    FillOutcome fill(const Fill& f) override {
        if (f.mode == FillMode::Always) {
            client_.set(f.key, f.entry, f.ttl);
            return FillOutcome::Stored;
        }
        Call c = call_for(f);
        return to_outcome(client_.eval(script_for(f.mode), {c.key}, c.args).integer());
    }

    std::vector<FillOutcome> fill_many(const std::vector<Fill>& fills) override {
        // Group by mode so each pipeline carries one kind of command.
        std::vector<FillOutcome> out(fills.size(), FillOutcome::Stored);
        std::vector<std::vector<std::string>> sets;
        std::vector<std::size_t> set_index;
        for (FillMode mode : {FillMode::IfNewer, FillMode::IfMarker}) {
            std::vector<Call> calls;
            std::vector<std::size_t> index;
            for (std::size_t i = 0; i < fills.size(); ++i) {
                if (fills[i].mode != mode) continue;
                calls.push_back(call_for(fills[i]));
                index.push_back(i);
            }
            if (calls.empty()) continue;
            auto replies = eval_many(script_for(mode), calls);
            for (std::size_t j = 0; j < replies.size(); ++j) out[index[j]] = to_outcome(replies[j].throw_if_error().integer());
        }
        for (std::size_t i = 0; i < fills.size(); ++i) {
            if (fills[i].mode != FillMode::Always) continue;
            sets.push_back({"SET", fills[i].key, fills[i].entry, "PX", std::to_string(fills[i].ttl.count())});
            set_index.push_back(i);
        }
        if (!sets.empty()) {
            for (const auto& r : client_.pipeline(sets)) r.throw_if_error();
        }
        return out;
    }

    bool remove_if_equals(const std::string& key, const std::string& expected) override {
        return client_.eval(entry_scripts::remove_if_equals(), {key}, {expected}).integer() == 1;
    }

    std::optional<TimedEntry> get_timed(const std::string& key) override {
        auto replies = client_.pipeline({{"GET", key}, {"PTTL", key}});
        return timed(replies[0], replies[1]);
    }

    std::vector<std::optional<TimedEntry>> get_many_timed(const std::vector<std::string>& keys) override {
        std::vector<std::vector<std::string>> commands;
        commands.reserve(keys.size() * 2);
        for (const auto& k : keys) {
            commands.push_back({"GET", k});
            commands.push_back({"PTTL", k});
        }
        auto replies = commands.empty() ? std::vector<RedisReply>{} : client_.pipeline(commands);
        std::vector<std::optional<TimedEntry>> out;
        out.reserve(keys.size());
        for (std::size_t i = 0; i + 1 < replies.size(); i += 2) out.push_back(timed(replies[i], replies[i + 1]));
        return out;
    }

    bool claim_refill(const std::string& key, const std::string& marker, std::chrono::milliseconds ttl) override {
        auto r = client_.command({"SET", refill_key_of(key), marker, "NX", "PX", std::to_string(ttl.count())});
        return !r.throw_if_error().is_nil();
    }

    FillOutcome refill(const std::string& key, const std::string& expected, const std::string& entry,
                       std::chrono::milliseconds ttl, const std::string& marker) override {
        auto r = client_.eval(entry_scripts::refill_if_unchanged(), {key, refill_key_of(key)},
                              {expected, entry, std::to_string(ttl.count()), marker});
        return r.integer() == 1 ? FillOutcome::Stored : FillOutcome::Refused;
    }

    // Standalone: DEL written on a connection kept until finish() reads the reply. Cluster and
    // Sentinel keep the default (their routing retries on MOVED / failover, one call at a time).
    std::unique_ptr<PendingRemove> start_remove(const std::string& key) override {
        if (client_.options().topology != RedisTopology::Standalone) return EntryStore::start_remove(key);
        // Dropped without finish(): the connection still counts its unread reply (broken()),
        // so the pool discards it.
        struct Sent final : PendingRemove {
            explicit Sent(PooledRedisConnection c) : conn(std::move(c)) {}
            void finish() override { conn->receive().throw_if_error(); }
            PooledRedisConnection conn;
        };
        auto conn = client_.connection_for_key(key);
        conn->send({"DEL", key});
        return std::make_unique<Sent>(std::move(conn));
    }

    void remove(const std::vector<std::string>& keys) override {
        if (keys.empty()) return;
        if (keys.size() == 1) {
            client_.del(keys);
            return;
        }
        std::vector<std::vector<std::string>> commands;
        for (const auto& k : keys) commands.push_back({"DEL", k});
        for (const auto& r : client_.pipeline(commands)) r.throw_if_error();
    }

private:
    // A GET's and a PTTL's replies as one entry (PTTL: -2 no key, -1 no TTL).
    static std::optional<TimedEntry> timed(const RedisReply& get, const RedisReply& pttl) {
        auto entry = get.throw_if_error().optional_string();
        if (!entry) return std::nullopt;
        return TimedEntry{std::move(*entry), std::chrono::milliseconds(pttl.throw_if_error().integer())};
    }

    struct Call {
        std::string key;
        std::vector<std::string> args;
    };

    static const RedisScript& script_for(FillMode mode) {
        return mode == FillMode::IfNewer ? entry_scripts::fill_if_newer() : entry_scripts::fill_if_marker();
    }

    static Call call_for(const Fill& f) {
        const std::string ttl = std::to_string(f.ttl.count());
        if (f.mode == FillMode::IfNewer) {
            return {f.key, {f.entry, f.version ? std::to_string(*f.version) : std::string(), ttl}};
        }
        return {f.key, {f.marker, f.entry, ttl}};
    }

    // EVALSHA for every call in one pipeline. A NOSCRIPT reply means that call did not run
    // (server restarted or flushed): load the script once and run those calls again.
    std::vector<RedisReply> eval_many(const RedisScript& script, const std::vector<Call>& calls) {
        auto build = [&](const std::vector<std::size_t>& which) {
            std::vector<std::vector<std::string>> cmds;
            for (std::size_t i : which) {
                std::vector<std::string> c = {"EVALSHA", script.sha1(), "1", calls[i].key};
                c.insert(c.end(), calls[i].args.begin(), calls[i].args.end());
                cmds.push_back(std::move(c));
            }
            return cmds;
        };
        std::vector<std::size_t> all(calls.size());
        for (std::size_t i = 0; i < calls.size(); ++i) all[i] = i;
        if (all.empty()) return {};
        auto replies = client_.pipeline(build(all));
        std::vector<std::size_t> again;
        for (std::size_t i = 0; i < replies.size(); ++i) {
            if (is_noscript(replies[i])) again.push_back(i);
        }
        if (!again.empty()) {
            client_.command({"SCRIPT", "LOAD", script.source()}).throw_if_error();
            auto retried = client_.pipeline(build(again));
            for (std::size_t j = 0; j < again.size(); ++j) replies[again[j]] = std::move(retried[j]);
        }
        return replies;
    }

    RedisClient& client_;
};

}  // namespace

std::string refill_key_of(const std::string& key) { return key + ":refill"; }

std::shared_ptr<EntryStore> make_redis_entry_store(RedisClient& client) {
    return std::make_shared<RedisEntryStore>(client);
}

}  // namespace lockstep
