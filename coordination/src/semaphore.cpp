#include "lockstep/coordination/semaphore.h"

#include <algorithm>
#include <random>
#include <thread>
#include <vector>

#include "lockstep/cache/redis_client.h"
#include "lockstep/cache/redis_script.h"
#include "lockstep/core/error.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/core/logging.h"
#include "lockstep/core/mutex.h"
#include "lockstep/core/names.h"
#include "lockstep/locks/lock_client.h"
#include "lockstep/locks/redis_lock_service.h"
#include "semaphore_scripts.h"
#include "zookeeper_semaphore.h"

namespace lockstep {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

std::string random_id() {
    std::random_device rd;
    std::mt19937_64 gen((static_cast<std::uint64_t>(rd()) << 32) ^ rd());
    static const char* hex = "0123456789abcdef";
    std::string id;
    for (int word = 0; word < 2; ++word) {
        std::uint64_t v = gen();
        for (int i = 0; i < 16; ++i, v >>= 4) id.push_back(hex[v & 0xf]);
    }
    return id;
}

// What the holder's clock allows for the server's clock running faster (Redlock's drift).
milliseconds drift_of(milliseconds lease) { return lease / 100 + milliseconds(2); }

}  // namespace

namespace detail {

struct PermitState {
    std::string id;  // Redis: the permit id; ZooKeeper: the lease node's path
    FenceToken fence = 0;
    std::uint64_t session = 0;  // ZooKeeper: the session generation that owns the lease node
    Mutex mutex;
    Clock::time_point valid_until GUARDED_BY(mutex);
    bool lost GUARDED_BY(mutex) = false;
    bool reported GUARDED_BY(mutex) = false;  // on_lost ran
    bool given_back GUARDED_BY(mutex) = false;  // the watchdog ended it at max_hold
    LockLoss loss GUARDED_BY(mutex);
    std::stop_source stop;
    // SemaphoreOptions::max_hold: the permit ends (MaxHoldReached) at this instant; max: no cap.
    // Set before the permit is shared, never changed.
    Clock::time_point cap = Clock::time_point::max();

    bool capped(Clock::time_point now) const { return now >= cap; }

    // ZooKeeper: the validity its session gives (ZooKeeperSemaphore::session_bound); set before
    // the permit is shared, never changed.
    std::function<Clock::time_point()> session_valid_until;

    bool is_lost() EXCLUDES(mutex) {
        {
            MutexLock lock(mutex);
            const auto now = Clock::now();
            if (lost || now >= valid_until || capped(now)) return true;
        }
        return session_valid_until && Clock::now() >= session_valid_until();
    }
};

struct SemaphoreImpl {
    SemaphoreImpl(RedisClient& r, std::string n, SemaphoreOptions o, std::string prefix)
        : redis(&r), name(std::move(n)), options(std::move(o)), owner_id(random_id()) {
        check();
        stem = prefix + "{" + name + "}";
        permits_key = stem + ":sem";
        fence_key = stem + ":sem:fence";
        channel = stem + ":sem:ch";
    }
#ifdef LOCKSTEP_HAVE_ZOOKEEPER
    SemaphoreImpl(const ZooKeeperLockService& service, std::string n, SemaphoreOptions o)
        : redis(nullptr), name(std::move(n)), options(std::move(o)), owner_id(random_id()) {
        check();
        zk = std::make_unique<ZooKeeperSemaphore>(service, name, options.permits);
        permits_key = zk->dir();
        fence_key = zk->dir();
    }
    std::unique_ptr<ZooKeeperSemaphore> zk;
#endif

    void check() const {
        check_name("semaphore name", name);
        if (options.permits < 1) throw ConfigError("SemaphoreOptions.permits", "must be at least 1");
        if (options.lease < milliseconds(30)) throw ConfigError("SemaphoreOptions.lease", "must be at least 30 ms");
        if (options.max_hold && *options.max_hold <= milliseconds(0)) {
            throw ConfigError("SemaphoreOptions.max_hold", "must be positive when set");
        }
    }
    bool on_zookeeper() const {
#ifdef LOCKSTEP_HAVE_ZOOKEEPER
        return static_cast<bool>(zk);
#else
        return false;
#endif
    }

    RedisClient* redis;  // null on ZooKeeper
    const std::string name;
    const SemaphoreOptions options;
    const std::string owner_id;
    std::string stem, permits_key, fence_key, channel;

    Mutex mutex;
    CondVar changed;
    std::vector<std::shared_ptr<PermitState>> live GUARDED_BY(mutex);
    bool closing GUARDED_BY(mutex) = false;
    long generation GUARDED_BY(mutex) = 0;  // release messages heard
    long renewals GUARDED_BY(mutex) = 0;
    std::uint64_t next_permit GUARDED_BY(mutex) = 0;
    bool subscribed GUARDED_BY(mutex) = false;
    RedisSubscriber::Subscription subscription;  // written once, by the first waiter, under `subscribe_mutex`
    Mutex subscribe_mutex;
    std::thread watchdog;

    std::string lease_ms() const { return std::to_string(options.lease.count()); }

    // Marks `p` lost (once) and reports it as a lock's loss is reported (locks/src/loss_report.h):
    // the permit's stop token, on_lost, then a log line, so the holder hears of the loss before
    // the log's I/O.
    void report_loss(PermitState& p, LockLossReason reason, const std::string& message) {
        LockLoss loss;
        {
            MutexLock lock(p.mutex);
            p.lost = true;
            if (p.reported) return;
            p.reported = true;
            p.loss = LockLoss{.name = name, .key = permits_key, .owner = p.id, .reason = reason, .message = message};
            loss = p.loss;
        }
        p.stop.request_stop();
        if (options.on_lost) {
            try {
                options.on_lost(loss);
            } catch (const std::exception& e) {
                logger()->error("semaphore '{}': on_lost threw: {}", name, e.what());
            } catch (...) {
                logger()->error("semaphore '{}': on_lost threw", name);
            }
        }
        logger()->warn("semaphore '{}': permit {} lost: {} ({})", name, p.id, to_string(reason), message);
    }

    void forget(const std::shared_ptr<PermitState>& p) EXCLUDES(mutex) {
        MutexLock lock(mutex);
        live.erase(std::remove(live.begin(), live.end(), p), live.end());
    }

    bool still_held(const std::shared_ptr<PermitState>& p) EXCLUDES(mutex) {
        MutexLock lock(mutex);
        return std::find(live.begin(), live.end(), p) != live.end();
    }

    // A granted permit joins `live` (renewed, counted, ended at its cap). A capped one wakes the
    // watchdog, which may be asleep until after the cap.
    void share(const std::shared_ptr<PermitState>& state) EXCLUDES(mutex) {
        if (options.max_hold) state->cap = Clock::now() + *options.max_hold;
        MutexLock lock(mutex);
        live.push_back(state);
        if (options.max_hold) changed.notify_all();
    }

    // Removes the permit from the server: true, or false when it was gone already.
    bool give_back(const PermitState& p) {
#ifdef LOCKSTEP_HAVE_ZOOKEEPER
        if (zk) return zk->release({.path = p.id, .czxid = p.fence, .session = p.session});
#endif
        return redis->eval(semaphore_release_script(), {permits_key}, {p.id, channel}).integer() == 1;
    }

    // The earliest cap among the held permits (max: none).
    Clock::time_point earliest_cap() const REQUIRES(mutex) {
        auto earliest = Clock::time_point::max();
        for (const auto& p : live) earliest = std::min(earliest, p->cap);
        return earliest;
    }

    // max_hold: a permit at its cap is reported first (lost(), stop token, on_lost), then given
    // back, so the slot frees now rather than a lease (or a session) later. Its holder's release
    // then finds it lost and reports that.
    void end_capped_permits() EXCLUDES(mutex) {
        const auto now = Clock::now();
        std::vector<std::shared_ptr<PermitState>> capped;
        {
            MutexLock lock(mutex);
            for (const auto& p : live) {
                if (p->capped(now)) capped.push_back(p);
            }
        }
        for (auto& p : capped) {
            if (!still_held(p)) continue;  // released meanwhile
            report_loss(*p, LockLossReason::MaxHoldReached, "max_hold reached: the permit was ended");
            forget(p);
            {
                MutexLock lock(p->mutex);
                p->given_back = true;
            }
            try {
                give_back(*p);
            } catch (const std::exception& e) {
                logger()->warn("semaphore '{}': giving back permit {} at max_hold failed ({}); it expires within the lease",
                               name, p->id, e.what());
            }
        }
    }

    // One attempt. A permit, or the ms until the earliest permit expires.
    std::pair<std::optional<SemaphorePermit>, milliseconds> attempt(const std::shared_ptr<SemaphoreImpl>& self) {
        std::string id;
        {
            MutexLock lock(mutex);
            if (closing) throw ConfigError("Semaphore", "acquire on a semaphore being destroyed");
            id = owner_id + ":" + std::to_string(next_permit++);
        }
        const auto sent = Clock::now();
        const RedisReply reply = redis->eval(semaphore_acquire_script(), {permits_key, fence_key},
                                            {std::to_string(options.permits), lease_ms(), id});
        const auto& r = reply.elements();
        if (r.size() != 2) throw ProtocolError("semaphore acquire script: unexpected reply");
        if (r[0].integer() == 0) return {std::nullopt, milliseconds(std::max<long long>(r[1].integer(), 1))};
        auto state = std::make_shared<PermitState>();
        state->id = id;
        state->fence = r[1].integer();
        {
            MutexLock lock(state->mutex);
            state->valid_until = sent + options.lease - drift_of(options.lease);
        }
        share(state);
        return {SemaphorePermit(self, state), milliseconds(0)};
    }

#ifdef LOCKSTEP_HAVE_ZOOKEEPER
    // Waits in ZooKeeper's queue until `deadline`: a permit, or nothing.
    std::optional<SemaphorePermit> zk_acquire(const std::shared_ptr<SemaphoreImpl>& self, Clock::time_point deadline) {
        {
            MutexLock lock(mutex);
            if (closing) throw ConfigError("Semaphore", "acquire on a semaphore being destroyed");
        }
        auto lease = zk->acquire(deadline);
        if (!lease) return std::nullopt;
        auto state = std::make_shared<PermitState>();
        state->id = lease->path;
        state->fence = lease->czxid;
        state->session = lease->session;
        state->session_valid_until = zk->session_bound(lease->session, drift_of(zk->session_timeout()));
        {
            // The session is the lease: its bound is session_valid_until, asked on every lost().
            MutexLock lock(state->mutex);
            state->valid_until = Clock::time_point::max();
        }
        share(state);
        return SemaphorePermit(self, state);
    }

    // The watchdog's round on ZooKeeper: a permit of an expired session, or of one disconnected
    // past a third of its timeout (the ensemble may expire it from then on), is lost.
    void zk_check_round() {
        std::vector<std::shared_ptr<PermitState>> permits;
        {
            MutexLock lock(mutex);
            permits = live;
        }
        const ZkSessionHealth h = zk->health();
        for (auto& p : permits) {
            if (!still_held(p)) continue;
            if (p->session != h.session || h.expired) {
                report_loss(*p, LockLossReason::Expired, "the ZooKeeper session that owned the lease node expired");
            } else if (h.unreachable) {
                report_loss(*p, LockLossReason::Unreachable,
                            "disconnected from ZooKeeper past a third of the session timeout (the ensemble may "
                            "expire the session from then on)");
            }
        }
        if (h.unreachable) zk->abandon_session(h.session);
        MutexLock lock(mutex);
        ++renewals;
    }
#endif

    // Subscribes to release messages once; false when that failed (waits then poll).
    bool ensure_subscribed() EXCLUDES(mutex) {
        {
            MutexLock lock(mutex);
            if (subscribed) return true;
        }
        MutexLock once(subscribe_mutex);
        {
            MutexLock lock(mutex);
            if (subscribed) return true;
        }
        try {
            subscription = redis->subscriber().subscribe(channel, [this](std::string_view, std::string_view) {
                MutexLock lock(mutex);
                ++generation;
                changed.notify_all();
            });
        } catch (const std::exception& e) {
            logger()->warn("semaphore '{}': cannot subscribe to releases ({}); waiters poll", name, e.what());
            return false;
        }
        MutexLock lock(mutex);
        subscribed = true;
        return true;
    }

    void renew_round() {
        fault::point("semaphore.before_renew");  // tests: a watchdog that cannot renew in time
        std::vector<std::shared_ptr<PermitState>> permits;
        {
            MutexLock lock(mutex);
            permits = live;
        }
        // A permit whose validity ran out is lost whatever the server says: its holder may have
        // been paused past the lease, and another process may hold the slot now.
        std::vector<std::shared_ptr<PermitState>> renewing;
        for (auto& p : permits) {
            if (p->capped(Clock::now())) continue;  // end_capped_permits() reports it, with its reason
            if (p->is_lost() && still_held(p)) {
                report_loss(*p, LockLossReason::Unreachable, "validity ran out before a renewal was acknowledged");
            } else {
                renewing.push_back(p);
            }
        }
        if (renewing.empty()) return;
        std::vector<std::string> args{lease_ms()};
        for (auto& p : renewing) args.push_back(p->id);
        const auto sent = Clock::now();
        try {
            const RedisReply reply = redis->eval(semaphore_renew_script(), {permits_key}, args);
            const auto& r = reply.elements();
            for (std::size_t i = 0; i < renewing.size() && i < r.size(); ++i) {
                if (r[i].integer() == 1) {
                    MutexLock lock(renewing[i]->mutex);
                    renewing[i]->valid_until = sent + options.lease - drift_of(options.lease);
                } else if (still_held(renewing[i])) {
                    // Gone, and not because its holder released it while the round was in flight.
                    report_loss(*renewing[i], LockLossReason::Expired, "the permit was gone from the server at renewal");
                }
            }
            MutexLock lock(mutex);
            ++renewals;
        } catch (const std::exception& e) {
            logger()->warn("semaphore '{}': renewal failed: {}", name, e.what());
        }
    }

    void run_watchdog() EXCLUDES(mutex) {
        auto interval = options.lease / 3;
#ifdef LOCKSTEP_HAVE_ZOOKEEPER
        // on_lost within T/6 of the bound lost() already reports.
        if (zk) interval = std::min<milliseconds>(std::chrono::duration_cast<milliseconds>(interval), zk->session_timeout() / 6);
#endif
        auto renew_at = Clock::now() + interval;
        for (;;) {
            {
                // Until the next round or the earliest cap, whichever comes first.
                MutexLock lock(mutex);
                for (;;) {
                    if (closing) return;
                    const auto until = std::min<Clock::time_point>(renew_at, earliest_cap());
                    if (Clock::now() >= until) break;
                    changed.wait_until(mutex, until);
                }
            }
            end_capped_permits();
            if (Clock::now() < renew_at) continue;
#ifdef LOCKSTEP_HAVE_ZOOKEEPER
            if (zk) {
                zk_check_round();
            } else
#endif
            {
                renew_round();
            }
            renew_at = Clock::now() + interval;
        }
    }
};

}  // namespace detail

// --- SemaphorePermit ---

SemaphorePermit::SemaphorePermit(std::shared_ptr<detail::SemaphoreImpl> owner, std::shared_ptr<detail::PermitState> state)
    : owner_(std::move(owner)), state_(std::move(state)) {}

SemaphorePermit::SemaphorePermit(SemaphorePermit&&) noexcept = default;

SemaphorePermit& SemaphorePermit::operator=(SemaphorePermit&& other) noexcept {
    if (this != &other) {
        if (state_) release_as(UnlockMode::Report);
        owner_ = std::move(other.owner_);
        state_ = std::move(other.state_);
    }
    return *this;
}

SemaphorePermit::~SemaphorePermit() {
    if (state_) release_as(UnlockMode::Report);
}

FenceToken SemaphorePermit::fence_token() const {
    if (!state_) throw NotOwnerError("SemaphorePermit: holds no permit");
    return state_->fence;
}

const std::string& SemaphorePermit::name() const {
    if (!state_) throw NotOwnerError("SemaphorePermit: holds no permit");
    return owner_->name;
}

bool SemaphorePermit::lost() const { return state_ && state_->is_lost(); }

std::stop_token SemaphorePermit::stop_token() const noexcept { return state_ ? state_->stop.get_token() : std::stop_token(); }

void SemaphorePermit::release() { release_as(UnlockMode::Report); }
void SemaphorePermit::release_checked() { release_as(UnlockMode::Throw); }

void SemaphorePermit::release_as(UnlockMode mode) {
    if (!state_) {
        throw NotOwnerError(std::string("SemaphorePermit: ") + (mode == UnlockMode::Throw ? "release_checked()" : "release()") +
                            " holds no permit (moved from, released, or not acquired)");
    }
    auto owner = std::move(owner_);
    auto state = std::move(state_);
    owner->forget(state);
    const bool lost_before = state->is_lost();
    const bool capped = state->capped(Clock::now());
    bool given_back;
    {
        MutexLock lock(state->mutex);
        given_back = state->given_back;
    }
    std::exception_ptr failure;
    std::string failure_message;
    long long result = 1;
    if (given_back) {
        result = 0;  // the watchdog ended it at max_hold: nothing left on the server
    } else {
        try {
            result = owner->give_back(*state) ? 1 : 0;
        } catch (const std::exception& e) {
            failure = std::current_exception();
            failure_message = e.what();
        } catch (...) {
            failure = std::current_exception();
            failure_message = "unknown error";
        }
    }
    const bool failed_after_loss = failure && lost_before;
    if (failed_after_loss) {
        // Past its validity the permit was lost before this release, whatever the release's error
        // says (a partitioned holder whose calls time out, a disconnected ZooKeeper session): the
        // loss is what the caller learns, reported and thrown as LockLostError like a lock's
        // (RACES L10, L11).
        failure = nullptr;
        result = 0;
    }
    if (failure) {
        // The server drops the permit within the lease anyway. Not a loss: the stop token stays.
        if (mode == UnlockMode::Throw) std::rethrow_exception(failure);
        try {
            std::rethrow_exception(failure);
        } catch (const std::exception& e) {
            logger()->warn("semaphore '{}': release of permit {} failed ({}); it expires within the lease",
                           owner->name, state->id, e.what());
        }
        return;
    }
    if (result != 1 || lost_before) {
        if (capped) {
            owner->report_loss(*state, LockLossReason::MaxHoldReached, "max_hold reached: the permit was ended");
        } else if (failed_after_loss) {
            owner->report_loss(*state, LockLossReason::Unreachable,
                               "the permit's validity ran out before release; the release failed: " + failure_message);
        } else {
            owner->report_loss(*state, lost_before ? LockLossReason::Expired : LockLossReason::FoundGone,
                               result != 1 ? "the permit was gone from the server at release"
                                           : "the permit's validity ran out before release");
        }
        if (mode == UnlockMode::Throw) {
            LockLoss loss;
            {
                MutexLock lock(state->mutex);
                loss = state->loss;
            }
            throw LockLostError("semaphore '" + owner->name + "': permit lost before release (" +
                                std::string(to_string(loss.reason)) + ": " + loss.message + ")");
        }
        return;
    }
    // Released: the stop token is not requested (a release is no loss).
}

// --- Semaphore ---

Semaphore::Semaphore(RedisClient& redis, std::string name, SemaphoreOptions options, std::string prefix)
    : impl_(std::make_shared<detail::SemaphoreImpl>(redis, std::move(name), std::move(options), std::move(prefix))) {
    impl_->watchdog = std::thread([impl = impl_.get()] { impl->run_watchdog(); });
}

Semaphore::Semaphore(std::shared_ptr<detail::SemaphoreImpl> impl) : impl_(std::move(impl)) {
    impl_->watchdog = std::thread([impl = impl_.get()] { impl->run_watchdog(); });
}

Semaphore::~Semaphore() {
#ifdef LOCKSTEP_HAVE_ZOOKEEPER
    if (impl_->zk) impl_->zk->close();
#endif
    {
        MutexLock lock(impl_->mutex);
        impl_->closing = true;
        impl_->changed.notify_all();
    }
    impl_->watchdog.join();
    impl_->subscription.reset();
    std::vector<std::shared_ptr<detail::PermitState>> left;
    {
        MutexLock lock(impl_->mutex);
        left.swap(impl_->live);
    }
    for (auto& p : left) {
        try {
            impl_->give_back(*p);
        } catch (const std::exception& e) {
            logger()->warn("semaphore '{}': release at close failed: {}", impl_->name, e.what());
        }
        impl_->report_loss(*p, LockLossReason::ClientClosed, "the semaphore was destroyed while the permit was held");
    }
}

SemaphorePermit Semaphore::acquire() {
    const auto deadline = impl_->options.max_wait ? detail::deadline_from_now(*impl_->options.max_wait)
                                                  : Clock::time_point::max();
    auto permit = try_acquire_until_steady(deadline);
    if (!permit) {
        throw TimeoutError("semaphore '" + impl_->name + "': no permit within max_wait (" +
                           std::to_string(impl_->options.max_wait->count()) + " ms)");
    }
    return std::move(*permit);
}

std::optional<SemaphorePermit> Semaphore::try_acquire() { return try_acquire_until_steady(Clock::now()); }

std::optional<SemaphorePermit> Semaphore::try_acquire_until_steady(Clock::time_point deadline) {
    auto& s = *impl_;
#ifdef LOCKSTEP_HAVE_ZOOKEEPER
    if (s.zk) return s.zk_acquire(impl_, deadline);
#endif
    bool subscribed = false;
    for (;;) {
        long seen;
        {
            MutexLock lock(s.mutex);
            seen = s.generation;
        }
        auto [permit, earliest_expiry] = s.attempt(impl_);
        if (permit) return std::move(permit);
        const auto now = Clock::now();
        if (now >= deadline) return std::nullopt;
        if (!subscribed) {
            // The first wait subscribes, then tries again at once: a release sent before the
            // subscription was confirmed is not heard.
            subscribed = s.ensure_subscribed();
            if (subscribed) continue;
        }
        // Wake on a release message, or when the earliest permit would expire (a dead holder's,
        // or a lost message); poll every 100 ms without a subscription.
        auto until = now + earliest_expiry + milliseconds(1);
        if (!subscribed) until = std::min(until, now + milliseconds(100));
        until = std::min(until, deadline);
        MutexLock lock(s.mutex);
        while (s.generation == seen && !s.closing) {
            if (s.changed.wait_until(s.mutex, until) == std::cv_status::timeout) break;
        }
    }
}

int Semaphore::available() {
#ifdef LOCKSTEP_HAVE_ZOOKEEPER
    if (impl_->zk) return std::max(0, impl_->options.permits - impl_->zk->children());
#endif
    const auto n = impl_->redis->eval(detail::semaphore_count_script(), {impl_->permits_key}, {}).integer();
    return std::max(0, impl_->options.permits - static_cast<int>(n));
}

std::size_t Semaphore::held() const {
    std::vector<std::shared_ptr<detail::PermitState>> permits;
    {
        MutexLock lock(impl_->mutex);
        permits = impl_->live;
    }
    return static_cast<std::size_t>(std::count_if(permits.begin(), permits.end(), [](const auto& p) { return !p->is_lost(); }));
}

long Semaphore::renewals() const {
    MutexLock lock(impl_->mutex);
    return impl_->renewals;
}

const std::string& Semaphore::name() const noexcept { return impl_->name; }
std::string Semaphore::permits_key() const { return impl_->permits_key; }
std::string Semaphore::fence_key() const { return impl_->fence_key; }

std::unique_ptr<Semaphore> make_semaphore(LockService& service, std::string name, SemaphoreOptions options) {
    const std::string_view backend = service.backend();
    if (backend == "redis") {
        auto* redis = dynamic_cast<RedisLockService*>(&service);
        if (!redis) throw ConfigError("lock service", "a 'redis' backend that is not a RedisLockService");
        return std::make_unique<Semaphore>(redis->client().redis(), std::move(name), std::move(options),
                                           redis->client().options().prefix);
    }
#ifdef LOCKSTEP_HAVE_ZOOKEEPER
    if (backend == "zookeeper") {
        auto* zk = dynamic_cast<ZooKeeperLockService*>(&service);
        if (!zk) throw ConfigError("lock service", "a 'zookeeper' backend that is not a ZooKeeperLockService");
        return std::unique_ptr<Semaphore>(
            new Semaphore(std::make_shared<detail::SemaphoreImpl>(*zk, std::move(name), std::move(options))));
    }
#endif
    std::string why;
    if (backend == "mysql") {
        why = "MySQL's GET_LOCK names one holder per lock and has nothing that expires on its own, so N leased "
              "permits cannot be kept there";
    } else if (backend == "zookeeper") {
        why = "this build has no ZooKeeper client; open the semaphore on a redis:// service";
    } else {
        why = "the '" + std::string(backend) + "' backend has no semaphore; open it on a redis:// service";
    }
    throw ConfigError("semaphore backend", why);
}

}  // namespace lockstep
