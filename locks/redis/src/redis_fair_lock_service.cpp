// RedisFairLockService: the fair mutex's acquire / wait / release flow over fair_lock_scripts,
// the watchdog that renews its holds, and the read-write locks delegated to RedisLockService.
#include "lockstep/locks/redis_fair_lock_service.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "fair_lock_scripts.h"
#include "hold_table.h"
#include "hold_table_mutex.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/core/names.h"
#include "lockstep/core/error.h"
#include "lockstep/core/mutex.h"
#include "lockstep/locks/lock_keys.h"
#include "lockstep/locks/redis_lock_service.h"

namespace lockstep {

using locks_detail::Hold;
using locks_detail::HoldKind;
using locks_detail::SteadyClock;
using locks_detail::SteadyTime;
using namespace std::chrono_literals;

namespace {

std::string ms(std::chrono::milliseconds d) { return std::to_string(d.count()); }

struct FairKeys {
    FairKeys(const std::string& prefix, const std::string& name) : k(prefix, name) {}
    LockKeys k;
    std::string lock() const { return k.stem() + ":fair"; }
    std::string queue() const { return k.stem() + ":fair:q"; }
    std::string queue_expiry() const { return k.stem() + ":fair:qx"; }
    std::string channel_prefix() const { return k.stem() + ":fair:ch:"; }
};

// One waiter's wake-up: set by the subscriber's thread when a release names this waiter.
class Wakeup {
public:
    void notify() EXCLUDES(mu_) {
        MutexLock g(mu_);
        woken_ = true;
        cv_.notify_one();
    }
    // Until notified or `until`, whichever is first; then forgets the notification.
    void wait_until(SteadyTime until) EXCLUDES(mu_) {
        MutexLock g(mu_);
        while (!woken_) {
            if (cv_.wait_until(mu_, until) == std::cv_status::timeout) break;
        }
        woken_ = false;
    }

private:
    Mutex mu_;
    CondVar cv_;
    bool woken_ GUARDED_BY(mu_) = false;
};

}  // namespace

struct RedisFairLockService::State : locks_detail::HoldBackend {
    State(RedisOptions r, LockServiceOptions o, RedisFairLockOptions f)
        : redis_options(r), prefix(o.prefix), fair(f), table(locks_detail::random_hex_id(), o.on_lost) {
        if (redis_options.pool_size < 16) redis_options.pool_size = 16;
        redis = std::make_unique<RedisClient>(redis_options);
        rw = std::make_unique<RedisLockService>(redis_options, std::move(o));
    }

    RedisOptions redis_options;
    std::string prefix;
    RedisFairLockOptions fair;
    locks_detail::HoldTable table;
    std::unique_ptr<RedisClient> redis;
    std::unique_ptr<RedisLockService> rw;
    std::atomic<std::uint64_t> attempts{0};

    Mutex mu;
    CondVar wake;
    bool stopping GUARDED_BY(mu) = false;
    std::thread watchdog;

    bool acquire(Hold& h, SteadyTime deadline) override {
        FairKeys keys(prefix, h.name);
        const std::vector<std::string> k = {keys.lock(), keys.queue(), keys.queue_expiry(), keys.k.fence()};
        const std::string waiter = h.owner + ":w" + std::to_string(attempts.fetch_add(1));
        auto attempt = [&](bool queue) {
            auto r = redis->eval(fair_scripts::acquire(), k,
                                 {waiter, h.owner, ms(h.lease), ms(fair.waiter_grace), queue ? "1" : "0",
                                  ms(fair.fence_counter_ttl)});
            r.throw_if_error();
            return std::pair<bool, long long>{r.elements().at(0).integer() == 1, r.elements().at(1).integer()};
        };
        auto done = [&](long long token) {
            h.token = token;
            h.key = keys.lock();
            wake.notify_one();  // the watchdog may need to renew sooner than it planned
            return true;
        };
        // First a try: acquired only if the lock is free and nobody waits (no barging).
        auto [got, value] = attempt(false);
        if (got) return done(value);
        if (SteadyClock::now() >= deadline) return false;
        // Wait in line: subscribe first, so a release published after this is delivered (L7).
        Wakeup wakeup;
        auto sub = redis->subscriber().subscribe(keys.channel_prefix() + waiter,
                                                 [&](std::string_view, std::string_view) { wakeup.notify(); });
        try {
            for (;;) {
                std::tie(got, value) = attempt(true);
                if (got) {
                    sub.reset();
                    return done(value);
                }
                // Re-check when woken, or before our place in line would expire (grace/2), or
                // when the holder's lease ends, whichever is first.
                auto next = SteadyClock::now() + std::min<std::chrono::milliseconds>(
                                                      fair.waiter_grace / 2, std::chrono::milliseconds(std::max(1LL, value)));
                next = std::min(next, deadline);
                wakeup.wait_until(next);
                if (SteadyClock::now() >= deadline) {
                    std::tie(got, value) = attempt(true);  // one last look before leaving the line
                    if (got) {
                        sub.reset();
                        return done(value);
                    }
                    leave(keys, waiter);
                    return false;
                }
            }
        } catch (...) {
            sub.reset();
            try {
                leave(keys, waiter);
            } catch (...) {
            }
            throw;
        }
    }

    void leave(const FairKeys& keys, const std::string& waiter) {
        redis->eval(fair_scripts::leave(), {keys.lock(), keys.queue(), keys.queue_expiry()}, {waiter, keys.channel_prefix()})
            .throw_if_error();
    }

    bool release(Hold& h) override {
        FairKeys keys(prefix, h.name);
        auto r = redis->eval(fair_scripts::release(), {keys.lock(), keys.queue(), keys.queue_expiry()},
                             {h.owner, keys.channel_prefix()});
        r.throw_if_error();
        return r.integer() == 1;
    }

    void abandon(Hold&) noexcept override {}  // a lost hold has nothing left on the server

    void run_watchdog() EXCLUDES(mu) {
        MutexLock g(mu);
        while (!stopping) {
            auto holds = table.all();
            std::chrono::milliseconds period = 1s;
            for (const auto& h : holds) period = std::min(period, std::max<std::chrono::milliseconds>(h->lease / 3, 5ms));
            g.unlock();
            for (const auto& h : holds) {
                if (h->lost.load()) continue;
                try {
                    auto r = redis->eval(fair_scripts::renew(), {h->key}, {h->owner, ms(h->lease)});
                    r.throw_if_error();
                    if (r.integer() == 0) table.report_lost(h, LockLossReason::Expired, "a renewal found the hold gone");
                } catch (const std::exception&) {
                    // Unreachable for now; the lease bounds how long this can go on unnoticed.
                }
            }
            g.lock();
            const auto until = SteadyClock::now() + period;
            while (!stopping) {
                if (wake.wait_until(mu, until) == std::cv_status::timeout) break;
            }
        }
    }
};

RedisFairLockService::RedisFairLockService(RedisOptions redis, LockServiceOptions options, RedisFairLockOptions fair)
    : state_(std::make_shared<State>(std::move(redis), std::move(options), fair)) {
    if (fair.waiter_grace < 2ms) throw ConfigError("waiter_grace", "must be at least 2ms");
    state_->watchdog = std::thread([s = state_.get()] { s->run_watchdog(); });
}

RedisFairLockService::~RedisFairLockService() {
    {
        MutexLock g(state_->mu);
        state_->stopping = true;
    }
    state_->wake.notify_all();
    state_->watchdog.join();
}

std::unique_ptr<DistributedMutex> RedisFairLockService::make_mutex(std::string name, LockOptions options) {
    check_name("lock name", name);
    if (options.lease < 3ms) throw ConfigError("lease", "must be at least 3ms");
    LockKeys check(state_->prefix, name);  // refuses names that would change the hash tag
    (void)check;
    return std::make_unique<locks_detail::HoldTableMutex<RedisFairLockService::State>>(state_, std::move(name), std::move(options), "fair lock");
}

std::unique_ptr<DistributedReadWriteLock> RedisFairLockService::make_read_write_lock(std::string name, LockOptions options) {
    return state_->rw->make_read_write_lock(std::move(name), std::move(options));
}

long long RedisFairLockService::queue_length(const std::string& name) const {
    FairKeys keys(state_->prefix, name);
    auto r = state_->redis->command({"LLEN", keys.queue()});
    return r.integer();
}

}  // namespace lockstep
