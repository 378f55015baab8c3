// RedlockLockService: the hold flow of hold_table.h over a quorum of independent masters
// (redlock_masters.h), one acquisition = one parallel round of acquire_script (+ one commit
// round only when the masters' counters disagree), and a watchdog thread that renews every hold
// on every master. docs/locks.md "Redlock" has the argument for each step.
#include "lockstep/locks/redlock_lock_service.h"

#include <algorithm>
#include <random>
#include <set>
#include <utility>

#include "hold_table.h"
#include "hold_table_mutex.h"
#include "lockstep/core/error.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/core/logging.h"
#include "lockstep/core/mutex.h"
#include "lockstep/core/names.h"
#include "lockstep/core/uri.h"
#include "lockstep/cache/redis_subscriber.h"
#include "lockstep/locks/lock_keys.h"
#include "redlock_masters.h"
#include "hold_timer.h"
#include "redlock_scripts.h"
#include "lockstep/cache/redis_time.h"

namespace lockstep {

using HoldRecord = locks_detail::Hold;  // lockstep::Hold is the movable value (hold.h)
using locks_detail::HoldKind;
using locks_detail::SteadyClock;
using locks_detail::SteadyTime;
using redlock_detail::MasterReply;

namespace {

// What a Redlock hold keeps beyond HoldRecord. `owner` is immutable; the times are the watchdog's.
struct RedlockHold {
    std::string owner;       // unique per acquisition: a lapsed holder's scripts never match a later one
    SteadyTime valid_until;  // start of the last successful round + lease − drift
    SteadyTime next_renew;
    SteadyTime first_due;  // when the watchdog must first look at it; never written after registration
    std::atomic<bool> released{false};  // unlock started: the watchdog must not call it lost
};

std::vector<RedisOptions> master_options(const RedlockOptions& o) {
    std::vector<RedisOptions> out;
    for (const auto& e : o.masters) {
        RedisOptions m = o.node;
        m.topology = RedisTopology::Standalone;
        m.nodes.clear();
        m.host = e.host;
        m.port = e.port;
        out.push_back(std::move(m));
    }
    return out;
}

// The vote of one master's acquire reply: {1, counter} or {0, counter}.
std::optional<FenceToken> vote_of(const MasterReply& r) {
    if (!r.reply || r.reply->type() != RedisReply::Type::Array || r.reply->elements().size() != 2) return std::nullopt;
    if (r.reply->elements()[0].integer() != 1) return std::nullopt;
    return r.reply->elements()[1].integer();
}

bool said_yes(const MasterReply& r) {
    return r.reply && r.reply->type() == RedisReply::Type::Integer && r.reply->integer() == 1;
}

// A waiter's wake-up: `woken` = a master announced a release since the waiter's last attempt
// started. Every master's message counts, not only a release's first: the first master may have
// freed its key while the others had not yet (the release is one parallel round, and its
// masters run in turn), so a retry on the first message can fail, and the next master's message
// must wake the waiter again (at most N retries per release).
struct Waiter {
    Mutex mu;
    CondVar cv;
    bool woken GUARDED_BY(mu) = false;
};

std::string first_error(const std::vector<MasterReply>& replies) {
    for (const auto& r : replies) {
        if (!r.reply) return r.error;
    }
    return "";
}

}  // namespace

struct RedlockLockService::State : locks_detail::HoldBackend {
    std::string_view backend_name() const noexcept override { return "redlock"; }
    State(RedlockOptions o, LockServiceOptions so)
        : options(std::move(o)),
          prefix(std::move(so.prefix)),
          masters(master_options(options), options.parallel),
          quorum((options.masters.size() + static_cast<std::size_t>(options.tolerated_restarts)) / 2 + 1),
          table(locks_detail::random_hex_id(), std::move(so.on_lost), *this) {}

    RedlockOptions options;
    std::string prefix;
    redlock_detail::RedlockMasters masters;
    std::size_t quorum;
    locks_detail::HoldTable table;
    std::atomic<std::uint64_t> acquisitions{0};
    std::atomic<std::uint64_t> message_wakeups{0};
    std::atomic<std::uint64_t> poll_wakeups{0};
    std::atomic<std::uint64_t> quorum_renewals{0};  // the watchdog's renewals that a quorum granted

    // One subscriber per master, made on the first contended wait (an uncontended service never
    // opens them): each is one pub/sub connection and thread shared by all waiters (L7).
    Mutex subscribers_mu;
    std::vector<std::unique_ptr<RedisSubscriber>> subscribers GUARDED_BY(subscribers_mu);

    locks_detail::HoldTimer watchdog;  // renews each hold when it is due (hold_timer.h)

    // Threads waiting in acquire(), woken when the service goes (stop()).
    Mutex waiters_mu;
    std::set<Waiter*> waiters GUARDED_BY(waiters_mu);

    // A new hold is registered (HoldTable): the watchdog is woken only when it would otherwise
    // sleep past the hold's first due time (HoldTimer::hold_added).
    void registered(const HoldRecord& h) noexcept override {
        // (first_due, not next_renew: the watchdog may already be renewing the hold.)
        watchdog.hold_added(std::static_pointer_cast<RedlockHold>(h.state)->first_due);
    }

    std::chrono::milliseconds drift(std::chrono::milliseconds lease) const {
        return std::chrono::milliseconds(static_cast<long long>(lease.count() * options.clock_drift_factor) + 2);
    }
    std::vector<std::string> keys(const std::string& name) const {
        LockKeys k(prefix, name);
        return {k.mutex(), k.fence()};
    }
    // Where every master announces a release of `name` (release_script).
    std::string channel(const std::string& name) const { return LockKeys(prefix, name).mutex() + ":rl"; }

    RedisSubscriber& subscriber(std::size_t i) EXCLUDES(subscribers_mu) {
        MutexLock g(subscribers_mu);
        if (subscribers.empty()) {
            for (auto& o : master_options(options)) subscribers.push_back(std::make_unique<RedisSubscriber>(std::move(o), RedisSubscriber::Channels::Sharded));
        }
        return *subscribers[i];
    }

    // Subscribes `w` to the release channel on every master that answered the failed attempt
    // (one that did not would cost a timeout here for nothing). Best effort: a master whose
    // subscription fails only leaves the waiter to its poll.
    std::vector<RedisSubscriber::Subscription> subscribe(const std::string& name, const std::vector<bool>& answered, Waiter& w) {
        std::vector<RedisSubscriber::Subscription> subs;
        const std::string ch = channel(name);
        for (std::size_t i = 0; i < answered.size(); ++i) {
            if (!answered[i]) continue;
            try {
                subs.push_back(subscriber(i).subscribe(ch, [&w](std::string_view, std::string_view) {
                    {
                        MutexLock g(w.mu);
                        w.woken = true;
                    }
                    w.cv.notify_one();
                }));
            } catch (const Error& e) {
                logger()->debug("redlock '{}': no release messages from master {}: {}", name, i, e.what());
            }
        }
        return subs;
    }

    // ---- acquisition ----

    // Contended: the waiter subscribes to the release channel on the masters, then retries on the
    // first release message, or after a pause when none comes. The pause is random so that
    // waiters spread out instead of hitting every master together (L9): [retry_min, retry_max]
    // while no subscription stands, subscribed_poll (the bounded fallback for a lost message,
    // e.g. during a subscriber's reconnect) once one does.
    bool acquire(HoldRecord& h, SteadyTime deadline) override {
        thread_local std::mt19937 rng{std::random_device{}()};
        std::vector<bool> answered;
        if (attempt(h, &answered)) return true;
        if (SteadyClock::now() >= deadline) return false;
        Waiter w;
        struct Listed {  // in `waiters` while this thread waits
            State& s;
            Waiter& w;
            Listed(State& s, Waiter& w) : s(s), w(w) {
                MutexLock g(s.waiters_mu);
                s.waiters.insert(&w);
            }
            ~Listed() {
                MutexLock g(s.waiters_mu);
                s.waiters.erase(&w);
            }
        } listed(*this, w);
        // Subscribed before the retry below: a release between the failed attempt and the
        // subscription was announced to nobody, and that retry sees it instead.
        const auto subs = subscribe(h.name, answered, w);
        for (;;) {
            table.throw_if_closed();  // woken by stop(): the service is gone
            {
                MutexLock g(w.mu);
                w.woken = false;  // releases announced before this attempt starts are seen by it
            }
            if (attempt(h)) return true;
            const auto now = SteadyClock::now();
            if (now >= deadline) return false;
            const auto pause = subs.empty()
                                   ? std::chrono::milliseconds(std::uniform_int_distribution<long long>(
                                         options.retry_min.count(), options.retry_max.count())(rng))
                                   : std::chrono::milliseconds(std::uniform_int_distribution<long long>(
                                         options.subscribed_poll.count() / 2, options.subscribed_poll.count())(rng));
            const auto wake_at = std::min(deadline, now + pause);
            // Tests stop a subscribed waiter here (its retry has failed) to release the lock
            // while it waits, so that only the message can wake it.
            fault::point("redlock.before_wait");
            MutexLock g(w.mu);
            while (!w.woken) {
                if (w.cv.wait_until(w.mu, wake_at) == std::cv_status::timeout) break;
            }
            (w.woken ? message_wakeups : poll_wakeups).fetch_add(1);
        }
    }

    // One round: votes from a quorum within the validity, the token fixed on a quorum.
    // `answered` (when given) gets which masters replied.
    bool attempt(HoldRecord& h, std::vector<bool>* answered_out = nullptr) {
        auto st = std::make_shared<RedlockHold>();
        st->owner = h.owner + ":" + std::to_string(acquisitions.fetch_add(1));
        const auto k = keys(h.name);
        const auto start = SteadyClock::now();
        const auto replies = masters.eval(redlock_detail::acquire_script(), k, {st->owner, std::to_string(h.lease.count())});

        std::vector<bool> won(replies.size(), false);
        std::size_t answered = 0, votes = 0;
        FenceToken token = 0;
        if (answered_out) answered_out->assign(replies.size(), false);
        for (std::size_t i = 0; i < replies.size(); ++i) {
            answered += replies[i].reply ? 1 : 0;
            if (answered_out && replies[i].reply) (*answered_out)[i] = true;
            if (auto v = vote_of(replies[i])) {
                won[i] = true;
                ++votes;
                token = std::max(token, *v);
            }
        }
        if (answered < quorum) {
            release_on(won, k, st->owner);
            throw ConnectionError("redlock '" + h.name + "': " + std::to_string(answered) + " of " +
                                  std::to_string(replies.size()) + " masters answered, " + std::to_string(quorum) +
                                  " needed (" + first_error(replies) + ")");
        }
        if (votes < quorum) {
            release_on(won, k, st->owner);
            return false;
        }
        // The token is the highest counter among the masters that voted. Those behind it (a
        // master restarted empty, or one that missed earlier holds) are raised to it while we
        // still hold their key; the token stands once a quorum has it (docs/locks.md).
        std::size_t fixed = 0;
        std::vector<bool> behind(replies.size(), false);
        bool any_behind = false;
        for (std::size_t i = 0; i < replies.size(); ++i) {
            if (!won[i]) continue;
            if (*vote_of(replies[i]) == token) {
                ++fixed;
            } else {
                behind[i] = any_behind = true;
            }
        }
        if (any_behind && fixed < quorum) {
            for (const auto& r : masters.eval(redlock_detail::commit_script(), k, {st->owner, std::to_string(token)}, behind)) {
                fixed += said_yes(r) ? 1 : 0;
            }
        }
        const auto valid_until = start + h.lease - drift(h.lease);
        if (fixed < quorum || SteadyClock::now() >= valid_until) {
            release_on(won, k, st->owner);
            return false;
        }
        st->valid_until = valid_until;
        h.valid_until.store(valid_until);  // the shared validity (hold_table.h): lost() from then on
        st->next_renew = start + h.lease / 3;
        st->first_due = h.renew ? st->next_renew : st->valid_until;
        h.token = token;
        h.key = k[0];
        h.state = st;
        return true;
    }

    // Best effort: a master that does not answer lets the key expire on its own. With a
    // `channel`, each master that deleted the key announces it there (waiters wake).
    std::size_t release_on(const std::vector<bool>& which, const std::vector<std::string>& k, const std::string& owner,
                           const std::string& channel = "") {
        if (std::none_of(which.begin(), which.end(), [](bool b) { return b; })) return 0;
        std::vector<std::string> args{owner};
        if (!channel.empty()) args.push_back(channel);
        std::size_t n = 0;
        for (const auto& r : masters.eval(redlock_detail::release_script(), {k[0]}, args, which)) n += said_yes(r) ? 1 : 0;
        return n;
    }

    // ---- release ----

    bool release(HoldRecord& h) override {
        auto st = std::static_pointer_cast<RedlockHold>(h.state);
        st->released = true;
        const std::size_t released =
            release_on(std::vector<bool>(masters.size(), true), keys(h.name), st->owner, channel(h.name));
        // Fewer than a quorum still had our key: another client may have held it meanwhile.
        return released >= quorum;
    }

    void abandon(HoldRecord& h) noexcept override {
        try {
            auto st = std::static_pointer_cast<RedlockHold>(h.state);
            // A release already went to every master (release() failed or found it gone): one
            // more fan-out would only wait the same timeouts again.
            if (!st || st->released.exchange(true)) return;
            release_on(std::vector<bool>(masters.size(), true), keys(h.name), st->owner, channel(h.name));
        } catch (...) {
            // the keys expire on their own
        }
    }

    // ---- watchdog ----

    void renew(const std::shared_ptr<HoldRecord>& h, RedlockHold& st, SteadyTime now) {
        if (!h->renew) {
            if (now >= st.valid_until) table.report_lost(h, LockLossReason::LeaseEnded, "fixed lease (renew = false) ended");
            return;
        }
        const auto start = SteadyClock::now();
        const auto replies = masters.eval(redlock_detail::renew_script(), {keys(h->name)[0]},
                                          {st.owner, std::to_string(h->lease.count())});
        std::size_t yes = 0, refused = 0;
        for (const auto& r : replies) {
            yes += said_yes(r) ? 1 : 0;
            refused += (r.reply && !said_yes(r)) ? 1 : 0;
        }
        if (st.released) return;
        if (yes >= quorum && SteadyClock::now() < start + h->lease - drift(h->lease)) {
            st.valid_until = start + h->lease - drift(h->lease);
            h->valid_until.store(std::max(h->valid_until.load(), st.valid_until));
            st.next_renew = start + h->lease / 3;
            quorum_renewals.fetch_add(1);
            return;
        }
        // Masters that refused have lost our key for good (expired, restarted empty): with more
        // than N − quorum of them the hold can never have a quorum again (L5, L8).
        if (refused > masters.size() - quorum) {
            table.report_lost(h, LockLossReason::Expired,
                              std::to_string(refused) + " of " + std::to_string(masters.size()) + " masters no longer hold it");
        } else if (SteadyClock::now() >= st.valid_until) {
            table.report_lost(h, LockLossReason::Unreachable,
                              "only " + std::to_string(yes) + " masters renewed it within its validity (" +
                                  std::to_string(quorum) + " needed)");
        } else {
            st.next_renew = SteadyClock::now() + std::max(std::chrono::milliseconds(1), h->lease / 20);  // retry soon
        }
    }

    // One watchdog pass (HoldTimer): renews the holds that are due, reports a fixed lease
    // that ended; returns when the next hold is due.
    SteadyTime watchdog_pass() {
        SteadyTime next = SteadyTime::max();
        for (const auto& h : table.all()) {
            auto st = std::static_pointer_cast<RedlockHold>(h->state);
            if (!st || h->lost.load() || st->released) continue;
            const auto now = SteadyClock::now();
            const auto due = h->renew ? st->next_renew : st->valid_until;
            if (now >= due) {
                try {
                    renew(h, *st, now);
                } catch (const std::exception& e) {
                    logger()->warn("redlock '{}': renewal failed: {}", h->name, e.what());
                }
            }
            next = std::min(next, h->renew ? st->next_renew : st->valid_until);
        }
        return next;
    }

    void stop() EXCLUDES(waiters_mu) {
        watchdog.stop();
        // Holds still registered (a thread holding while the service goes): reported lost
        // (ClientClosed) and released now; waiters leave with LockClientClosedError (hold_table.h).
        table.close(*this);
        MutexLock g(waiters_mu);
        for (Waiter* w : waiters) {
            MutexLock wg(w->mu);
            w->woken = true;
            w->cv.notify_all();
        }
    }
};

RedlockLockService::RedlockLockService(RedlockOptions redlock, LockServiceOptions options) {
    if (redlock.masters.empty()) throw ConfigError("masters", "Redlock needs at least one master");
    if (redlock.tolerated_restarts < 0) throw ConfigError("restarts", "must not be negative");
    const std::size_t n = redlock.masters.size();
    const std::size_t q = (n + static_cast<std::size_t>(redlock.tolerated_restarts)) / 2 + 1;
    if (q > n) {
        throw ConfigError("restarts", "tolerating " + std::to_string(redlock.tolerated_restarts) + " restarts needs a quorum of " +
                                          std::to_string(q) + ", more than the " + std::to_string(n) + " masters");
    }
    if (redlock.retry_min.count() < 0 || redlock.retry_max < redlock.retry_min) {
        throw ConfigError("retry_max", "the retry pause needs 0 <= retry_min <= retry_max");
    }
    if (redlock.subscribed_poll.count() < 1) throw ConfigError("subscribed_poll", "must be at least 1 ms");
    if (!(redlock.clock_drift_factor >= 0 && redlock.clock_drift_factor < 0.5)) {
        throw ConfigError("drift", "the clock drift factor must be in [0, 0.5)");
    }
    if (redlock.node.pool_size < 16) redlock.node.pool_size = 16;  // the watchdog and every waiter share it
    state_ = std::make_shared<State>(std::move(redlock), std::move(options));
    state_->watchdog.start([s = state_.get()] { return s->watchdog_pass(); });
}

RedlockLockService::~RedlockLockService() { state_->stop(); }

std::unique_ptr<DistributedMutex> RedlockLockService::make_mutex(std::string name, LockOptions options) {
    check_name("lock name", name);  // the one rule of every name (core/names.h)
    // Below this the drift allowance (lease/100 + 2 ms) and one round trip leave no validity.
    if (options.lease < std::chrono::milliseconds(10)) throw ConfigError("lease", "a Redlock lease must be at least 10 ms");
    return std::make_unique<locks_detail::HoldTableMutex<RedlockLockService::State>>(state_, std::move(name), std::move(options), "lock");
}

std::unique_ptr<DistributedReadWriteLock> RedlockLockService::make_read_write_lock(std::string, LockOptions) {
    throw ConfigError("backend", "redlock has no read-write lock (supports_read_write() is false); use a mutex");
}

std::chrono::system_clock::time_point RedlockLockService::server_time() {
    for (std::size_t i = 0;; ++i) {
        try {
            return redis_server_time(state_->masters.client(i));
        } catch (const ConnectionError&) {
            if (i + 1 == state_->masters.size()) throw;  // no master answered
        }
    }
}

std::size_t RedlockLockService::masters() const noexcept { return state_->masters.size(); }
std::uint64_t RedlockLockService::wakeups_by_message() const noexcept { return state_->message_wakeups.load(); }
std::uint64_t RedlockLockService::wakeups_by_poll() const noexcept { return state_->poll_wakeups.load(); }
std::uint64_t RedlockLockService::renewals() const noexcept { return state_->quorum_renewals.load(); }
std::size_t RedlockLockService::quorum() const noexcept { return state_->quorum; }
std::string RedlockLockService::lock_key(const std::string& name) const { return LockKeys(state_->prefix, name).mutex(); }
std::string RedlockLockService::fence_key(const std::string& name) const { return LockKeys(state_->prefix, name).fence(); }

// ---- URL ----

RedlockOptions parse_redlock_url(std::string_view url) {
    constexpr std::string_view scheme = "redlock://";
    if (url.substr(0, scheme.size()) != scheme) {
        throw ConfigError("scheme", "expected 'redlock://host:port,host:port,...', got '" + std::string(url) + "'");
    }
    RedlockOptions o;
    std::string rest(url.substr(scheme.size()));
    std::string kept;  // the redis:// params, handed to parse_redis_url
    if (const auto q = rest.find('?'); q != std::string::npos) {
        std::string query = rest.substr(q + 1);
        rest.resize(q);
        std::size_t pos = 0;
        while (pos <= query.size()) {
            const auto amp = std::min(query.find('&', pos), query.size());
            const std::string pair = query.substr(pos, amp - pos);
            pos = amp + 1;
            if (pair.empty()) continue;
            const auto eq = pair.find('=');
            const std::string key = pair.substr(0, eq);
            const std::string value = eq == std::string::npos ? "" : pair.substr(eq + 1);
            const std::string part = "query parameter '" + key + "'";
            try {
                if (key == "restarts") {
                    std::size_t used = 0;
                    o.tolerated_restarts = std::stoi(value, &used);
                    if (used != value.size() || o.tolerated_restarts < 0) throw std::invalid_argument(value);
                } else if (key == "drift") {
                    std::size_t used = 0;
                    o.clock_drift_factor = std::stod(value, &used);
                    if (used != value.size()) throw std::invalid_argument(value);
                } else if (key == "fanout") {
                    if (value != "parallel" && value != "sequential") throw std::invalid_argument(value);
                    o.parallel = value == "parallel";
                } else {
                    kept += (kept.empty() ? "?" : "&") + pair;
                }
            } catch (const std::logic_error&) {
                throw ConfigError(part, "bad value '" + value + "'");
            }
        }
    }
    if (rest.empty()) throw ConfigError("host", "redlock:// needs at least one host:port");
    // The host list, auth and redis params have the syntax of a cluster URL's seed list.
    RedisOptions node = parse_redis_url("redis+cluster://" + rest + kept);
    for (const auto& e : node.nodes) o.masters.push_back(e);
    if (kept.find("connect_timeout") == std::string::npos) node.connect_timeout = std::chrono::milliseconds(250);
    if (kept.find("socket_timeout") == std::string::npos) node.socket_timeout = std::chrono::milliseconds(250);
    node.topology = RedisTopology::Standalone;
    node.nodes.clear();
    o.node = std::move(node);
    return o;
}

}  // namespace lockstep
