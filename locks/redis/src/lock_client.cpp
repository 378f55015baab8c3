// RedisLockClient, the facade: construction (options checked, eviction and replication checks,
// the watchdog started, failover watched), destruction (Impl::close: every live hold released and
// reported, every waiter woken, no call left using the RedisClient), the public accessors, and
// LockKeys. The flows live one per file: redis_acquire.cpp, redis_release.cpp,
// redis_watchdog.cpp, redis_wait_rooms.cpp, redis_hold_registry.cpp.
#include "lockstep/locks/lock_client.h"

#include <algorithm>
#include <random>
#include <utility>

#include "lock_client_impl.h"
#include "replication_wait.h"  // L8: WAIT, failover (confirm_new_hold)
#include "failover_watch.h"
#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"
#include "lockstep/core/names.h"
#include "lockstep/locks/lock_errors.h"

namespace lockstep {

namespace {

// 64 random bits: unique among the clients that can meet on one lock name (a collision needs
// ~2^32 live clients), and 16 bytes shorter than 128 in every owner field, waiter id, channel
// and script argument (the held mutex's bytes in Redis).
std::string random_client_id() {
    std::random_device rd;
    static const char* hex = "0123456789abcdef";
    std::string id;
    for (int i = 0; i < 2; ++i) {
        std::uint32_t v = rd();
        for (int j = 0; j < 8; ++j) {
            id += hex[v & 0xf];
            v >>= 4;
        }
    }
    return id;
}

// local_handoff_after when unset (see its comment in lock_client.h for the measurements).
constexpr std::chrono::microseconds kDefaultLocalHandoffAfter{250};

// Bad options must fail at construction with the option's name, not later inside a Lua script
// as an opaque "invalid expire time" reply.
LockClientOptions checked(LockClientOptions o) {
    if (o.waiter_grace.count() <= 0) throw ConfigError("waiter_grace", "must be positive");
    if (o.claim_refresh.count() <= 0) throw ConfigError("claim_refresh", "must be positive");
    if (o.fence_counter_ttl.count() <= 0) throw ConfigError("fence_counter_ttl", "must be positive");
    if (o.handoff_window.count() < 0) throw ConfigError("handoff_window", "must not be negative");
    if (o.handoff_after.count() < 0) throw ConfigError("handoff_after", "must not be negative");
    if (o.local_handoff_after && o.local_handoff_after->count() < 0) {
        throw ConfigError("local_handoff_after", "must not be negative");
    }
    return o;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Impl: construction and destruction

RedisLockClient::Impl::Impl(RedisClient& r, LockClientOptions o)
    : redis(r),
      options(checked(std::move(o))),
      id(random_client_id()),
      gates(options.local_handoff_after.value_or(
                std::min<std::chrono::microseconds>(kDefaultLocalHandoffAfter, options.handoff_after))),
      rooms([&r]() -> RedisSubscriber& { return r.subscriber(); }, std::chrono::milliseconds(0)) {}

RedisLockClient::Impl::~Impl() {
    // Normally close() ran already (~RedisLockClient); this covers a constructor that threw.
    join_threads();
}

void RedisLockClient::Impl::start() {
    // Started with the first hold: a client that never holds a lock runs no thread for it.
    watchdog.start_lazily([this] { return watchdog_pass(); });
    expiry.start_lazily([this] { return expiry_pass(); });
}

void RedisLockClient::Impl::join_threads() {
    watchdog.stop();
    expiry.stop();
}

bool RedisLockClient::Impl::is_closed() const {
    MutexLock lock(mutex);
    return closed;
}

RedisLockClient::Impl::Use::Use(Impl& impl) : impl_(impl) {
    MutexLock lock(impl_.mutex);
    if (impl_.closed) {
        throw LockClientClosedError("lock client " + impl_.id + " was destroyed; make locks from a live client");
    }
    ++impl_.calls_in_use;
}

RedisLockClient::Impl::Use::~Use() {
    MutexLock lock(impl_.mutex);
    if (--impl_.calls_in_use == 0) impl_.calls_done_cv.notify_all();
}

void RedisLockClient::Impl::close() {
    {
        MutexLock lock(mutex);
        if (closed) return;
        closed = true;  // from here on no new call reaches `redis`
    }
    join_threads();
    // Waiters wake and leave with LockClientClosedError; calls under way finish (each is one
    // round trip, bounded by the Redis timeouts).
    wake_everyone();
    gates.close_all();  // threads queued at a local gate leave with LockClientClosedError too
    {
        MutexLock lock(mutex);
        while (calls_in_use != 0) calls_done_cv.wait(mutex);
    }

    release_live_holds_at_close();
    // No waiter is left: drop the subscriptions now, while the RedisClient surely lives.
    drop_subscriptions();
}

// Holds still held when the client is destroyed: released in one pipeline (others need not wait
// for the leases) and reported lost (ClientClosed). REQUIRES: the watchdog stopped and no call
// under way (close()).
void RedisLockClient::Impl::release_live_holds_at_close() {
    std::vector<std::shared_ptr<RedisHold>> live;
    {
        MutexLock lock(mutex);
        for (const auto& [k, h] : holds) {
            if (h->active && !h->lost) live.push_back(h);
        }
    }
    if (!live.empty()) {
        logger()->warn("lock client {} destroyed with {} hold(s) still held: releasing them, reporting them lost",
                       id, live.size());
        std::vector<ScriptCall> calls;
        calls.reserve(live.size());
        for (const auto& h : live) calls.push_back(h->side->release_call(h->owner));
        try {
            // The holds end whatever the answers; a fair release's grant goes to the next holder.
            const std::vector<RedisReply> replies = run_pipelined(redis, calls);
            for (std::size_t i = 0; i < replies.size() && i < live.size(); ++i) live[i]->side->released(replies[i]);
        } catch (const std::exception& e) {
            logger()->warn("lock client {}: releasing the holds at destruction failed ({}); their leases end them",
                           id, e.what());
        }
        std::vector<std::pair<std::shared_ptr<RedisHold>, LockLoss>> losses;
        {
            MutexLock lock(mutex);
            for (const auto& h : live) {
                if (auto loss = mark_lost_locked(*h, LockLossReason::ClientClosed,
                                                 "the lock client was destroyed while the lock was held")) {
                    losses.emplace_back(h, *loss);
                }
                h->active = false;
            }
        }
        for (const auto& [h, loss] : losses) report(h, loss);
    }
}

// ---------------------------------------------------------------------------------------------
// RedisLockClient

namespace {

// B3: may this server evict lock keys? Every lock key has a TTL, so any policy but noeviction
// (volatile-* picks among keys with a TTL, allkeys-* among all) can delete a held lock once
// maxmemory is reached. Returns the finding ("" when eviction cannot hit lock keys); throws
// ConfigError under EvictionCheck::Refuse.
bool check_eviction(RedisClient& redis, EvictionCheck mode, const std::string& client_id) {
    if (mode == EvictionCheck::Off) return false;
    const auto& ro = redis.options();
    const std::string where = ro.host + ":" + std::to_string(ro.port);
    std::string policy;
    long long maxmemory = -1;
    try {
        // "maxmemory*" works on every Redis version (several names in one CONFIG GET need 7.0).
        auto reply = redis.command({"CONFIG", "GET", "maxmemory*"});
        const auto& e = reply.elements();
        for (std::size_t i = 0; i + 1 < e.size(); i += 2) {
            if (e[i].str() == "maxmemory") maxmemory = std::stoll(e[i + 1].str());
            if (e[i].str() == "maxmemory-policy") policy = e[i + 1].str();
        }
    } catch (const std::exception& e) {
        // CONFIG renamed or forbidden (ACL, managed services), or the server not reachable yet.
        static std::atomic<bool> warned{false};
        if (!warned.exchange(true)) {
            logger()->warn(
                "lock client {}: could not read maxmemory-policy of Redis {} ({}); make sure it is "
                "noeviction (or maxmemory 0): an evicted lock key lets a second holder in (docs/locks.md)",
                client_id, where, e.what());
        }
        return false;
    }
    if (maxmemory == 0 || policy == "noeviction" || policy.empty()) return false;
    const std::string finding = "Redis " + where + " has maxmemory " + std::to_string(maxmemory) +
                                " with maxmemory-policy " + policy +
                                ": it may evict held lock keys (each has a TTL) and let a second holder in. "
                                "Use maxmemory-policy noeviction, or put the locks on a Redis that is not the cache";
    if (mode == EvictionCheck::Refuse) {
        throw ConfigError("maxmemory-policy",
                          finding + " (LockClientOptions::eviction_check = EvictionCheck::Warn accepts the risk)");
    }
    logger()->error("lock client {}: {} (accepted: eviction_check = Warn)", client_id, finding);
    return true;
}

}  // namespace

RedisLockClient::RedisLockClient(RedisClient& redis, LockClientOptions options)
    : impl_(std::make_shared<Impl>(redis, std::move(options))) {
    check_replication_wait(*impl_);
    impl_->eviction_possible = check_eviction(redis, impl_->options.eviction_check, impl_->id);
    if (impl_->options.prefix.find_first_of("{}") != std::string::npos) {
        logger()->debug("lock prefix '{}' contains braces; the hash tag is still shared per name",
                        impl_->options.prefix);
    }
    impl_->start();
    watch_master_changes(*impl_);
}

RedisLockClient::~RedisLockClient() {
    unwatch_master_changes(*impl_);
    impl_->close();
    bool listener = false;
    {
        MutexLock lock(impl_->listener_mutex);
        listener = impl_->reconnect_listener_added;
    }
    if (listener) impl_->redis.subscriber().remove_reconnect_listener(impl_->reconnect_listener);
}

const std::string& RedisLockClient::id() const noexcept {
    return impl_->id;
}
std::string RedisLockClient::owner_of_this_thread() const {
    return impl_->owner_of_this_thread();
}
LockKeys RedisLockClient::keys(std::string_view name) const {
    return LockKeys(impl_->options.prefix, name);
}
RedisClient& RedisLockClient::redis() const noexcept {
    return impl_->redis;
}
const LockClientOptions& RedisLockClient::options() const noexcept {
    return impl_->options;
}

LockClientStats RedisLockClient::stats() const {
    const auto& s = impl_->stats;
    LockClientStats r;
    r.acquire_attempts = s.acquire_attempts.load();
    r.acquired = s.acquired.load();
    r.wakeups = s.wakeups.load();
    r.renew_batches = s.renew_batches.load();
    r.renewals = s.renewals.load();
    r.losses = s.losses.load();
    r.unlocks_of_lost_holds = s.unlocks_of_lost_holds.load();
    r.unlock_errors = s.unlock_errors.load();
    r.gate_waits = s.gate_waits.load();
    r.acquire_latency = s.acquire_latency.snapshot();
    r.hold_time = s.hold_time.snapshot();
    return r;
}

bool RedisLockClient::eviction_possible() const noexcept {
    return impl_->eviction_possible;
}

std::size_t RedisLockClient::tracked_holds() const {
    MutexLock lock(impl_->mutex);
    return impl_->holds.size();
}

// ---------------------------------------------------------------------------------------------
// LockKeys

LockKeys::LockKeys(std::string_view prefix, std::string_view name) : name_(name) {
    check_name("lock name", name);  // the one rule of every name (core/names.h)
    stem_.reserve(prefix.size() + name.size() + 2);
    stem_.append(prefix).append("{").append(name).append("}");
}

}  // namespace lockstep
