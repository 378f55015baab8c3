#include "replication_wait.h"

#include "failover_watch.h"
#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"
#include "lockstep/core/uri.h"
#include "lockstep/locks/lock_errors.h"
#include "lockstep/locks/redis_lock_service.h"

namespace lockstep {

namespace {

using std::chrono::milliseconds;

// Forgets the just registered hold and releases it on the server (best effort: its lease ends it
// otherwise). Nobody was told about the hold, so nothing is reported.
void drop_new_hold(RedisLockClient::Impl& impl, const LockSide& side, const std::string& owner, const std::string& hid) {
    {
        MutexLock lock(impl.mutex);
        auto it = impl.holds.find(hid);
        if (it != impl.holds.end()) {
            it->second->active = false;
            impl.holds.erase(it);
        }
    }
    try {
        side.release(owner, true);
    } catch (const std::exception& e) {
        logger()->warn("lock '{}': could not release a hold that is not kept ({}); its lease ends it", side.name(),
                       e.what());
    }
}

// WAIT counts the acknowledgements of the calling connection's last write. The acquire script ran
// on a pooled connection that another thread may have borrowed since, so this writes a marker on
// its own connection to the same master first: the replication stream is ordered, so a replica
// that acknowledged the marker has the acquisition too. Returns the acknowledgements, or -1 with
// `failure` set.
long long replica_acks(RedisLockClient::Impl& impl, const LockSide& side, const std::string& owner,
                       const ReplicationWait& wait, std::string& failure) {
    try {
        auto conn = impl.redis.connection_for_key(side.hold_key());
        const auto replies = conn->pipeline({{"SET", side.hold_key() + ":acked", owner, "PX", ms(wait.timeout + milliseconds(1000))},
                                             {"WAIT", std::to_string(wait.replicas), ms(wait.timeout)}});
        if (replies.size() != 2) throw ProtocolError("SET + WAIT answered " + std::to_string(replies.size()) + " replies");
        replies[0].throw_if_error();
        return replies[1].throw_if_error().integer();
    } catch (const Error& e) {
        failure = e.what();
        return -1;
    }
}

}  // namespace

void check_replication_wait(const RedisLockClient::Impl& impl) {
    const ReplicationWait& w = impl.options.replication_wait;
    if (w.replicas < 0) throw ConfigError("replication_wait.replicas", "must not be negative");
    if (w.replicas == 0) return;
    if (w.timeout.count() <= 0) throw ConfigError("replication_wait.timeout", "must be positive");
    if (w.timeout >= impl.redis.options().socket_timeout) {
        throw ConfigError("replication_wait.timeout", "must be shorter than the Redis socket_timeout (" +
                                                          std::to_string(impl.redis.options().socket_timeout.count()) +
                                                          " ms), or the WAIT breaks its connection");
    }
}

bool confirm_new_hold(RedisLockClient::Impl& impl, const LockSide& side, const std::string& owner, const std::string& hid,
                      SteadyTime sent) {
    if (master_changed_since(impl, sent)) {
        logger()->info("lock '{}': the Redis master changed while it was being acquired; acquiring it again",
                       side.name());
        drop_new_hold(impl, side, owner, hid);
        return false;
    }
    const ReplicationWait& wait = impl.options.replication_wait;
    if (wait.replicas <= 0) return true;
    std::string failure;
    const long long acks = replica_acks(impl, side, owner, wait, failure);
    if (acks >= wait.replicas) return true;
    drop_new_hold(impl, side, owner, hid);
    throw ReplicationWaitError(
        "lock '" + side.name() + "': acquired on the master but " +
        (acks < 0 ? "WAIT failed (" + failure + ")"
                  : std::to_string(acks) + " of " + std::to_string(wait.replicas) + " replica(s) acknowledged it within " +
                        std::to_string(wait.timeout.count()) + " ms") +
        "; released again (RACES L8: a failover now could lose it)");
}

std::string take_replication_wait(std::string_view url, ReplicationWait& wait) {
    const auto q = url.find('?');
    if (q == std::string_view::npos) return std::string(url);
    std::string kept;
    std::string_view query = url.substr(q + 1);
    while (!query.empty()) {
        const auto amp = query.find('&');
        const std::string_view pair = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
        const auto eq = pair.find('=');
        const std::string_view key = pair.substr(0, eq);
        const std::string value(eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1));
        const std::string part = "query parameter '" + std::string(key) + "'";
        if (key == "wait_replicas") {
            if (value.empty() || value.size() > 3 || value.find_first_not_of("0123456789") != std::string::npos)
                throw ConfigError(part, "must be a replica count (0..999), got '" + value + "'");
            wait.replicas = std::stoi(value);
        } else if (key == "wait_timeout") {
            wait.timeout = parse_duration(value, part);
        } else {
            // Everything else is the Redis URL's (parse_redis_url judges it, stray '&' included).
            kept += (kept.empty() ? "" : "&") + std::string(pair);
        }
    }
    return std::string(url.substr(0, q)) + (kept.empty() ? "" : "?" + kept);
}

}  // namespace lockstep
