#include "lockstep/locks/lock_client.h"

#include <algorithm>
#include <random>
#include <utility>

#include "lock_client_impl.h"
#include "../redis/src/replication_wait.h"  // L8: WAIT, failover (confirm_new_hold)
#include "../redis/src/failover_watch.h"
#include "lockstep/core/error.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/core/logging.h"
#include "lockstep/core/names.h"
#include "lockstep/locks/lock_errors.h"

namespace lockstep {

namespace {

using std::chrono::milliseconds;

// Thread numbers are never reused within a process (pthread ids are), so a thread started
// after another one died cannot pass for the dead thread and "re-enter" its orphaned hold.
std::uint64_t this_thread_number() {
    static std::atomic<std::uint64_t> next{1};
    thread_local const std::uint64_t n = next.fetch_add(1);
    return n;
}

// 64 random bits: unique among the clients that can meet on one lock name (a collision needs
// ~2^32 live clients), and 16 bytes shorter than 128 in every owner field, waiter id, channel
// and script argument (issue 14: the held mutex's bytes in Redis).
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

long long ms_until(SteadyTime t, SteadyTime now) {
    if (t <= now) return 0;
    return std::chrono::ceil<milliseconds>(t - now).count();
}

}  // namespace

std::string_view to_string(LockLossReason r) noexcept {
    switch (r) {
        case LockLossReason::Expired:
            return "expired";
        case LockLossReason::Unreachable:
            return "unreachable";
        case LockLossReason::LeaseEnded:
            return "lease ended";
        case LockLossReason::FoundGone:
            return "found gone";
        case LockLossReason::ClientClosed:
            return "client closed";
        case LockLossReason::Failover:
            return "failover";
    }
    return "unknown";
}

std::string hold_id(const std::string& key, const std::string& owner) {
    return key + '\n' + owner;
}

AttemptResult parse_attempt(const RedisReply& reply) {
    const auto& e = reply.elements();
    if (e.empty()) throw ProtocolError("lock acquire script returned an empty array");
    AttemptResult r;
    r.status = static_cast<AttemptStatus>(e[0].integer());
    if (e.size() > 1) r.value = e[1].integer();
    // The mutex script answers the score as an integer, the older form as a string.
    if (e.size() > 2) {
        r.queue_score =
            e[2].type() == RedisReply::Type::Integer ? std::to_string(e[2].integer()) : e[2].str();
    }
    return r;
}

HoldView view_hold(const RedisLockClient::Impl& impl, const std::string& key) {
    auto h = impl.find_hold(key, impl.owner_of_this_thread());
    HoldView v;
    if (!h) return v;
    MutexLock lock(impl.mutex);
    v.exists = true;
    v.count = h->count;
    v.token = h->token;
    // Renewed holds too: while the watchdog is stalled or its renewal stuck (a paused process, a
    // slow or unreachable server), the lease runs out on the server all the same and another
    // client may hold the lock. A late renewal that finds the hold still there moves
    // valid_until on again (the hold never lapsed: nobody re-creates a registered hold).
    v.lost = h->lost || SteadyClock::now() >= h->valid_until;
    return v;
}

// ---------------------------------------------------------------------------------------------
// Impl: construction

namespace {
// Bad options must fail at construction with the option's name, not later inside a Lua script
// as an opaque "invalid expire time" reply.
LockClientOptions checked(LockClientOptions o) {
    if (o.waiter_grace.count() <= 0) throw ConfigError("waiter_grace", "must be positive");
    if (o.claim_refresh.count() <= 0) throw ConfigError("claim_refresh", "must be positive");
    if (o.fence_counter_ttl.count() <= 0) throw ConfigError("fence_counter_ttl", "must be positive");
    if (o.handoff_window.count() < 0) throw ConfigError("handoff_window", "must not be negative");
    if (o.handoff_after.count() < 0) throw ConfigError("handoff_after", "must not be negative");
    return o;
}
}  // namespace

RedisLockClient::Impl::Impl(RedisClient& r, LockClientOptions o)
    : redis(r), options(checked(std::move(o))), id(random_client_id()) {}

RedisLockClient::Impl::~Impl() {
    // Normally close() ran already (~RedisLockClient); this covers a constructor that threw.
    {
        MutexLock lock(mutex);
        stopping = true;
    }
    watchdog_cv.notify_all();
    if (watchdog.joinable()) watchdog.join();
}

void RedisLockClient::Impl::start() {
    watchdog = std::thread([this] { watchdog_loop(); });
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
        stopping = true;
    }
    watchdog_cv.notify_all();
    if (watchdog.joinable()) watchdog.join();
    // Waiters wake and leave with LockClientClosedError; calls under way finish (each is one
    // round trip, bounded by the Redis timeouts).
    wake_everyone();
    {
        MutexLock lock(mutex);
        while (calls_in_use != 0) calls_done_cv.wait(mutex);
    }

    // Holds still held: release them (others need not wait for the leases) and report them.
    std::vector<std::shared_ptr<Hold>> live;
    {
        MutexLock lock(mutex);
        for (const auto& [k, h] : holds) {
            if (h->active && !h->lost) live.push_back(h);
        }
    }
    if (!live.empty()) {
        logger()->warn("lock client {} destroyed with {} hold(s) still held: releasing them, reporting them lost",
                       id, live.size());
        std::vector<std::vector<std::string>> commands;
        std::vector<RenewCall> calls;
        calls.reserve(live.size());
        for (const auto& h : live) {
            const RenewCall& c = calls.emplace_back(h->side->release_call(h->owner));
            std::vector<std::string> cmd{"EVALSHA", c.script->sha1(), std::to_string(c.keys.size())};
            cmd.insert(cmd.end(), c.keys.begin(), c.keys.end());
            cmd.insert(cmd.end(), c.args.begin(), c.args.end());
            commands.push_back(std::move(cmd));
        }
        try {
            auto replies = redis.pipeline(commands);
            for (std::size_t i = 0; i < replies.size() && i < live.size(); ++i) {
                if (replies[i].is_error() && replies[i].error_message().rfind("NOSCRIPT", 0) == 0) {
                    const RenewCall& c = calls[i];
                    redis.eval(*c.script, c.keys, c.args);
                }
            }
        } catch (const std::exception& e) {
            logger()->warn("lock client {}: releasing the holds at destruction failed ({}); their leases end them",
                           id, e.what());
        }
        std::vector<std::pair<std::shared_ptr<Hold>, LockLoss>> losses;
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

    // No waiter is left: drop the subscriptions now, while the RedisClient surely lives.
    std::vector<RedisSubscriber::Subscription> subscriptions;
    {
        MutexLock lock(rooms_mutex);
        for (auto& [c, r] : rooms) {
            MutexLock rl(r->mutex);
            subscriptions.push_back(std::move(r->subscription));
        }
        rooms.clear();
    }
}

std::string RedisLockClient::Impl::owner_of_this_thread() const {
    return id + ":" + std::to_string(this_thread_number());
}

std::shared_ptr<Hold> RedisLockClient::Impl::find_hold(const std::string& key,
                                                       const std::string& owner) const {
    MutexLock lock(mutex);
    auto it = holds.find(hold_id(key, owner));
    return it == holds.end() ? nullptr : it->second;
}

// ---------------------------------------------------------------------------------------------
// Losses

std::optional<LockLoss> RedisLockClient::Impl::mark_lost_locked(Hold& hold, LockLossReason reason,
                                                                std::string message) {
    if (hold.lost) return std::nullopt;
    hold.lost = true;
    stats.losses.fetch_add(1);
    LockLoss loss{hold.side->name(), hold.side->hold_key(), hold.owner, reason, std::move(message)};
    logger()->warn("lock '{}' ({} hold of {}) lost: {} ({})", hold.side->name(), hold.side->kind(), hold.owner,
                   to_string(reason), loss.message);
    return loss;
}

void RedisLockClient::Impl::report(const std::shared_ptr<Hold>& hold, const LockLoss& loss) {
    using Callback = std::function<void(const LockLoss&)>;
    for (const Callback* cb : {static_cast<const Callback*>(&options.on_lost), &hold->side->settings().on_lost}) {
        if (!*cb) continue;
        try {
            (*cb)(loss);
        } catch (const std::exception& e) {
            logger()->error("on_lost callback for lock '{}' threw: {}", loss.name, e.what());
        } catch (...) {
            logger()->error("on_lost callback for lock '{}' threw", loss.name);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Acquire

namespace {

// One acquire script, with its fault points and counters. A connection error after the script
// was sent may mean it ran: a fresh acquisition then abandons whatever it may have created
// (its owner is unique to this thread and it holds nothing locally, so that is safe), and the
// lease bounds the damage if even that fails.
AttemptResult attempt_once(RedisLockClient::Impl& impl, const LockSide& side, const std::string& owner,
                           milliseconds lease, bool expect_held, const WaitTicket* ticket) {
    fault::point(side.fault_points().before_acquire);
    impl.stats.acquire_attempts.fetch_add(1);
    AttemptResult r;
    try {
        r = side.attempt(owner, lease, expect_held, ticket);
    } catch (const ConnectionError&) {
        if (!expect_held) {
            try {
                side.release(owner, true);
            } catch (const std::exception& e) {
                logger()->warn("lock '{}': could not clean up after a failed acquire: {}", side.name(),
                               e.what());
            }
        }
        throw;
    }
    fault::point(side.fault_points().after_acquire);
    return r;
}

// A waiter that gives up withdraws its queue entry or claim. Best effort: if that fails (server
// unreachable) the entry expires on its own (waiter_grace after the planned re-check).
void leave_quietly(const LockSide& side, const std::string& owner, const WaitTicket& ticket) {
    try {
        side.leave(owner, ticket);
    } catch (const std::exception& e) {
        logger()->debug("lock '{}': leaving the wait queue failed: {}", side.name(), e.what());
    }
}

}  // namespace

// What one acquire call carries through its stages.
struct RedisLockClient::Impl::Acquisition {
    const std::shared_ptr<const LockSide>& side;
    const std::string owner;  // this thread's owner id
    const std::string hid;    // hold_id(side->hold_key(), owner)
    const SteadyTime started = SteadyClock::now();  // stats.acquire_latency
};

// The flow: re-entry (L6), else a fresh try, else wait for a turn (L7, L9). A thread whose
// client already listens on the lock's channel (another of its threads waits there) goes
// straight to the queuing try: a plain try would only find the lock busy and cost one more
// script per acquisition (issue 14 item 4).
bool RedisLockClient::Impl::acquire(const std::shared_ptr<const LockSide>& side,
                                    std::optional<SteadyTime> deadline) {
    Use use(*this);
    std::string owner = owner_of_this_thread();
    std::string hid = hold_id(side->hold_key(), owner);
    Acquisition a{side, std::move(owner), std::move(hid)};
    std::shared_ptr<Hold> held;
    {
        MutexLock lock(mutex);
        absorb_one_unlock.erase(a.hid);
        auto it = holds.find(a.hid);
        if (it != holds.end()) held = it->second;
    }
    if (held) return reenter(a, held);

    const bool may_wait = deadline && SteadyClock::now() < *deadline;
    if (!may_wait || !listening_on(side->wait_channel())) {
        AttemptResult r;
        if (try_fresh(a, nullptr, r)) return true;
        if (!deadline || SteadyClock::now() >= *deadline) return false;
    }
    return wait_for_turn(a, *deadline);
}

// L6: re-entry. It still goes to Redis: that refreshes the lease and notices a lost hold.
bool RedisLockClient::Impl::reenter(Acquisition& a, const std::shared_ptr<Hold>& held) {
    const LockSide& side = *a.side;
    {
        MutexLock lock(mutex);
        if (held->lost) {
            throw LockLostError("lock '" + side.name() + "': re-entering a " + side.kind() +
                                " hold that was lost; unlock it first");
        }
    }
    const SteadyTime sent = SteadyClock::now();
    AttemptResult r = attempt_once(*this, side, a.owner, held->lease, true, nullptr);
    if (r.status == AttemptStatus::Reentered) {
        MutexLock lock(mutex);
        ++held->count;
        held->valid_until = std::max(held->valid_until, sent + held->lease);
        if (!held->renew) held->next_check = held->valid_until;
        return true;
    }
    if (r.status == AttemptStatus::Lost) {
        std::optional<LockLoss> loss;
        {
            MutexLock lock(mutex);
            loss = mark_lost_locked(*held, LockLossReason::FoundGone, "gone when the holder re-entered it");
        }
        if (loss) report(held, *loss);
        throw LockLostError("lock '" + side.name() + "': the " + side.kind() +
                            " hold being re-entered was lost (lease ran out or server restarted)");
    }
    throw ProtocolError("lock '" + side.name() + "': unexpected answer to a re-entry");
}

// A new hold enters the registry. The watchdog is woken only when this hold needs a check
// earlier than the one it already sleeps towards: an acquisition (and so every hand-over) does
// not cost the watchdog a wake-up and the process a context switch.
void RedisLockClient::Impl::register_hold(Acquisition& a, SteadyTime sent, FenceToken token) {
    const HoldSettings& settings = a.side->settings();
    auto h = std::make_shared<Hold>();
    h->side = a.side;
    h->owner = a.owner;
    h->lease = settings.lease;
    h->renew = settings.renew;
    h->count = 1;
    h->token = token;
    h->valid_until = sent + settings.lease;
    h->next_check = settings.renew ? sent + settings.lease / 3 : h->valid_until;
    stats.acquired.fetch_add(1);
    h->acquired_at = SteadyClock::now();
    stats.acquire_latency.record(h->acquired_at - a.started);
    bool wake_watchdog = false;
    {
        MutexLock lock(mutex);
        wake_watchdog = h->next_check < watchdog_wakes_at;
        holds[a.hid] = std::move(h);
    }
    if (wake_watchdog) watchdog_cv.notify_all();
}

// One fresh attempt (plain, or queuing with `ticket`); true when acquired, false when busy.
bool RedisLockClient::Impl::try_fresh(Acquisition& a, const WaitTicket* ticket, AttemptResult& out) {
    const LockSide& side = *a.side;
    for (int tries = 0;; ++tries) {
        const SteadyTime sent = SteadyClock::now();
        out = attempt_once(*this, side, a.owner, side.settings().lease, false, ticket);
        switch (out.status) {
            case AttemptStatus::Acquired:
                register_hold(a, sent, out.value);
                if (!confirm_new_hold(*this, side, a.owner, sent)) continue;  // L8 (replication_wait.h)
                return true;
            case AttemptStatus::Busy:
                return false;
            case AttemptStatus::UpgradeRefused:
                throw LockUpgradeError("lock '" + side.name() +
                                       "': this thread holds the read side; read -> write upgrade is refused "
                                       "(release the read lock first)");
            case AttemptStatus::Reentered:
                // Redis names this thread as holder but this process does not know the hold (an
                // earlier acquire whose reply was lost): drop it and acquire properly.
                if (tries > 0) throw ProtocolError("lock '" + side.name() + "': stale hold could not be cleared");
                side.release(a.owner, true);
                continue;
            case AttemptStatus::Lost:
                break;
        }
        throw ProtocolError("lock '" + side.name() + "': unexpected answer to an acquire");
    }
}

bool RedisLockClient::Impl::listening_on(const std::string& channel) {
    MutexLock lock(rooms_mutex);
    return rooms.find(channel) != rooms.end();
}

// L7: subscribe first, then a queuing try, then sleep until a release message or the re-check
// time, and again. The subscription is confirmed before the try, so a release published after
// the try reaches this waiter.
bool RedisLockClient::Impl::wait_for_turn(Acquisition& a, SteadyTime deadline) {
    const LockSide& side = *a.side;
    Waiter waiter;
    waiter.id = id + ":w" + std::to_string(next_waiter.fetch_add(1));
    std::shared_ptr<Room> room = join_room(side.wait_channel(), side.wake_rule(), waiter);
    WaitTicket ticket{waiter.id, "", -1};
    bool ticketed = false;
    AttemptResult r;
    try {
        for (;;) {
            {
                MutexLock lock(room->mutex);
                waiter.woken = false;
            }
            // After the reset: close() sets `closed` before it wakes everyone.
            if (is_closed()) {
                throw LockClientClosedError("lock '" + side.name() + "': the lock client was destroyed while this thread waited");
            }
            const bool unbounded = deadline == SteadyTime::max();
            ticket.wait_left_ms = unbounded ? -1 : ms_until(deadline, SteadyClock::now());
            ticketed = true;
            if (try_fresh(a, &ticket, r)) {
                leave_room(room, waiter);
                return true;
            }
            if (!r.queue_score.empty()) ticket.queue_score = r.queue_score;
            const SteadyTime now = SteadyClock::now();
            if (now >= deadline) {
                ticketed = false;
                leave_quietly(side, a.owner, ticket);
                leave_room(room, waiter);
                return false;
            }
            // +1 ms: the server expires a key only once its expiry time has passed. At the latest
            // after claim_refresh: a wake-up sent to a waiter that cannot take it (a frozen
            // process at the head of the queue, a lost message) leaves a free lock untaken for at
            // most that long, not for the holder's whole lease.
            const long long recheck = std::min<long long>(std::max(0LL, r.value), options.claim_refresh.count());
            const SteadyTime wake_at = std::min(deadline, now + milliseconds(recheck) + milliseconds(1));
            fault::point("locks.wait.before_sleep");
            {
                MutexLock lock(room->mutex);
                while (!waiter.woken) {
                    if (waiter.cv.wait_until(room->mutex, wake_at) == std::cv_status::timeout) break;
                }
            }
            fault::point("locks.wait.after_sleep");
        }
    } catch (...) {
        if (ticketed) leave_quietly(side, a.owner, ticket);
        leave_room(room, waiter);
        throw;
    }
}

// ---------------------------------------------------------------------------------------------
// Release

void RedisLockClient::Impl::release(const LockSide& side, bool checked) {
    const std::string owner = owner_of_this_thread();
    const std::string hid = hold_id(side.hold_key(), owner);
    std::shared_ptr<Hold> held;
    bool last = false;
    bool client_closed = false;
    {
        MutexLock lock(mutex);
        auto it = holds.find(hid);
        if (it == holds.end()) {
            if (absorb_one_unlock.erase(hid) > 0) return;  // the guard's unlock after a LockLostError
            // L10: never a silent success, and nothing is sent: a thread that does not hold the
            // lock cannot release it.
            throw NotOwnerError("lock '" + side.name() + "': unlock of a " + side.kind() +
                                " lock this thread does not hold");
        }
        held = it->second;
        last = held->count == 1;
        client_closed = closed;
        if (!closed) ++calls_in_use;  // a Use, taken under the same lock as the check
    }
    auto forget = [&] {
        stats.hold_time.record(SteadyClock::now() - held->acquired_at);
        MutexLock lock(mutex);
        held->active = false;
        auto it = holds.find(hid);
        if (it != holds.end() && it->second == held) holds.erase(it);
    };
    auto lost_error = [&] {
        {
            MutexLock lock(mutex);
            absorb_one_unlock.insert(hid);
        }
        return LockLostError("lock '" + side.name() + "': unlock of a " + side.kind() +
                             " hold that was lost (lease ran out, server restarted or client destroyed); "
                             "the critical section was not protected to its end");
    };
    if (client_closed) {
        // close() released this hold and reported it; nothing reaches Redis any more.
        forget();
        stats.unlocks_of_lost_holds.fetch_add(1);
        if (checked) throw lost_error();
        return;
    }
    struct EndUse {
        Impl& impl;
        ~EndUse() {
            MutexLock lock(impl.mutex);
            if (--impl.calls_in_use == 0) impl.calls_done_cv.notify_all();
        }
    } end_use{*this};

    fault::point(side.fault_points().before_release);
    int r = 0;
    try {
        r = side.release(owner, last);
    } catch (const std::exception& e) {
        // The release may or may not have run. Stop renewing a last hold (its lease ends it at
        // the latest); count an inner one down.
        if (last) {
            forget();
        } else {
            MutexLock lock(mutex);
            --held->count;
        }
        if (checked) throw;
        // The guard path: reported, never thrown (a std guard's destructor would terminate).
        stats.unlock_errors.fetch_add(1);
        logger()->warn("lock '{}': releasing the {} hold of {} failed ({}); its lease ends it", side.name(),
                       side.kind(), owner, e.what());
        return;
    }
    fault::point(side.fault_points().after_release);

    if (r == 0) {
        // L3, L4, L10: the hold is not ours any more (lease ran out, maybe someone else holds it
        // now, or the server restarted). Nothing was deleted. Reported (once) either way; thrown
        // only to a checked unlock.
        std::optional<LockLoss> loss;
        {
            MutexLock lock(mutex);
            loss = mark_lost_locked(*held, LockLossReason::FoundGone, "gone at unlock");
        }
        stats.unlocks_of_lost_holds.fetch_add(1);
        forget();
        if (loss) report(held, *loss);
        if (checked) throw lost_error();
        return;
    }
    if (last) {
        forget();
    } else {
        MutexLock lock(mutex);
        --held->count;
    }
}

// ---------------------------------------------------------------------------------------------
// Watchdog (L5)

void RedisLockClient::Impl::watchdog_loop() {
    MutexLock lock(mutex);
    while (!stopping) {
        SteadyTime earliest = SteadyTime::max();
        for (const auto& [k, h] : holds) {
            if (h->active && !h->lost) earliest = std::min(earliest, h->next_check);
        }
        if (earliest == SteadyTime::max()) {
            watchdog_wakes_at = SteadyTime::max();
            watchdog_cv.wait(mutex);
            continue;
        }
        SteadyTime now = SteadyClock::now();
        if (now < earliest) {
            watchdog_wakes_at = earliest;
            watchdog_cv.wait_until(mutex, earliest);
            continue;
        }
        // Awake and working: a hold registered now is seen at the next pass through the loop.
        watchdog_wakes_at = SteadyTime::min();
        std::vector<std::shared_ptr<Hold>> due;
        std::vector<std::pair<std::shared_ptr<Hold>, LockLoss>> ended;
        for (const auto& [k, h] : holds) {
            if (!h->active || h->lost) continue;
            if (!h->renew) {
                if (h->next_check <= now) {
                    if (auto loss = mark_lost_locked(*h, LockLossReason::LeaseEnded,
                                                     "fixed lease ran out before unlock")) {
                        ended.emplace_back(h, *loss);
                    }
                }
            } else if (h->next_check <= now + h->lease / 12) {
                // Holds due soon ride along in this batch: one round trip for all of them.
                due.push_back(h);
            }
        }
        lock.unlock();
        for (const auto& [h, loss] : ended) report(h, loss);
        if (!due.empty()) renew_batch(std::move(due));
        lock.lock();
    }
}

void RedisLockClient::Impl::renew_batch(std::vector<std::shared_ptr<Hold>> due) {
    // The race tested by RedisMutexTest.L5_RenewalRacingUnlockNeitherRecreatesNorExtends: an unlock
    // may happen between here and the round trip. The renew script only extends a hold that is
    // still this owner's, and results for holds unlocked meanwhile are ignored.
    fault::point("locks.watchdog.before_renew");
    const SteadyTime sent = SteadyClock::now();
    std::vector<std::vector<std::string>> commands;
    std::vector<RenewCall> calls;  // built here, not per acquisition: most holds never renew
    commands.reserve(due.size());
    calls.reserve(due.size());
    for (const auto& h : due) {
        const RenewCall& c = calls.emplace_back(h->side->renew_call(h->owner, h->lease));
        std::vector<std::string> cmd{"EVALSHA", c.script->sha1(), std::to_string(c.keys.size())};
        cmd.insert(cmd.end(), c.keys.begin(), c.keys.end());
        cmd.insert(cmd.end(), c.args.begin(), c.args.end());
        commands.push_back(std::move(cmd));
    }
    std::vector<RedisReply> replies;
    std::string failure;
    try {
        replies = redis.pipeline(commands);
        for (std::size_t i = 0; i < replies.size() && i < due.size(); ++i) {
            // After SCRIPT FLUSH or a server restart: eval() loads the script and retries.
            if (replies[i].is_error() && replies[i].error_message().rfind("NOSCRIPT", 0) == 0) {
                const RenewCall& c = calls[i];
                replies[i] = redis.eval(*c.script, c.keys, c.args);
            }
        }
    } catch (const std::exception& e) {
        failure = e.what();
    }
    stats.renew_batches.fetch_add(1);

    std::vector<std::pair<std::shared_ptr<Hold>, LockLoss>> losses;
    {
        MutexLock lock(mutex);
        const SteadyTime now = SteadyClock::now();
        for (std::size_t i = 0; i < due.size(); ++i) {
            Hold& h = *due[i];
            if (!h.active || h.lost) continue;  // unlocked meanwhile: no report, nothing re-created
            const bool answered =
                failure.empty() && i < replies.size() && replies[i].type() == RedisReply::Type::Integer;
            if (answered && replies[i].integer() == 1) {
                h.valid_until = sent + h.lease;
                h.next_check = sent + h.lease / 3;
                stats.renewals.fetch_add(1);
            } else if (answered) {
                if (auto loss = mark_lost_locked(h, LockLossReason::Expired, "renewal found the hold gone")) {
                    losses.emplace_back(due[i], *loss);
                }
            } else {
                std::string why = failure.empty() && i < replies.size() && replies[i].is_error()
                                      ? replies[i].error_message()
                                      : failure;
                if (now >= h.valid_until) {
                    if (auto loss = mark_lost_locked(h, LockLossReason::Unreachable,
                                                     "no renewal succeeded for a whole lease: " + why)) {
                        losses.emplace_back(due[i], *loss);
                    }
                } else {
                    logger()->warn("lock '{}': renewal failed, retrying: {}", h.side->name(), why);
                    auto retry =
                        std::clamp<SteadyClock::duration>(h.lease / 10, milliseconds(10), milliseconds(1000));
                    h.next_check = std::min(h.valid_until, now + retry);
                }
            }
        }
    }
    for (const auto& [h, loss] : losses) report(h, loss);
    fault::point("locks.watchdog.after_renew");
}

// ---------------------------------------------------------------------------------------------
// Waiting rooms (L7, L9)

std::shared_ptr<RedisLockClient::Impl::Room> RedisLockClient::Impl::join_room(const std::string& channel,
                                                                              WakeRule rule, Waiter& waiter) {
    std::shared_ptr<Room> room;
    bool subscribe = false;
    bool add_listener = false;
    {
        MutexLock lock(rooms_mutex);
        if (!reconnect_listener_added) {
            reconnect_listener_added = true;
            add_listener = true;
        }
        auto& slot = rooms[channel];
        if (!slot) {
            slot = std::make_shared<Room>();
            slot->channel = channel;
            slot->rule = rule;
            subscribe = true;
        }
        room = slot;
        ++room->refs;
    }
    if (add_listener) {
        // Messages published while the subscriber was reconnecting are lost: everyone re-checks.
        std::weak_ptr<Impl> self = weak_from_this();
        reconnect_listener = redis.subscriber().add_reconnect_listener([self] {
            if (auto s = self.lock()) s->wake_everyone();
        });
    }
    if (subscribe) {
        try {
            std::weak_ptr<Room> weak_room = room;
            std::weak_ptr<Impl> self = weak_from_this();
            auto sub = redis.subscriber().subscribe(
                channel, [weak_room, self](std::string_view, std::string_view msg) {
                    auto r = weak_room.lock();
                    auto s = self.lock();
                    if (r && s) on_message(r, msg, s.get());
                });
            MutexLock lock(room->mutex);
            room->subscription = std::move(sub);
            room->ready = true;
        } catch (...) {
            {
                MutexLock lock(room->mutex);
                room->failed = std::current_exception();
                room->ready = true;
            }
            room->ready_cv.notify_all();
            {
                MutexLock lock(rooms_mutex);
                auto it = rooms.find(channel);
                if (it != rooms.end() && it->second == room) rooms.erase(it);
                --room->refs;
            }
            throw;
        }
        room->ready_cv.notify_all();
    }
    MutexLock lock(room->mutex);
    while (!room->ready) room->ready_cv.wait(room->mutex);
    if (room->failed) {
        auto failed = room->failed;
        lock.unlock();
        {
            MutexLock rl(rooms_mutex);
            --room->refs;
        }
        std::rethrow_exception(failed);
    }
    room->waiters.push_back(&waiter);
    return room;
}

void RedisLockClient::Impl::leave_room(const std::shared_ptr<Room>& room, Waiter& waiter) {
    {
        MutexLock lock(room->mutex);
        auto& w = room->waiters;
        w.erase(std::remove(w.begin(), w.end(), &waiter), w.end());
    }
    RedisSubscriber::Subscription last;
    {
        MutexLock lock(rooms_mutex);
        if (--room->refs == 0) {
            auto it = rooms.find(room->channel);
            if (it != rooms.end() && it->second == room) rooms.erase(it);
            MutexLock rl(room->mutex);
            last = std::move(room->subscription);
        }
    }
    // `last` unsubscribes here, outside every lock (the subscriber thread may be delivering).
}

void RedisLockClient::Impl::on_message(const std::shared_ptr<Room>& room, std::string_view message,
                                       Impl* impl) {
    MutexLock lock(room->mutex);
    if (room->waiters.empty()) return;
    Waiter* target = nullptr;
    if (room->rule == WakeRule::NamedWaiter) {
        // B5: a mutex release names the one waiter it chose (L9): "<this client's id>:w<n>".
        // Anything else on the channel (an outside PUBLISH, a malformed message) wakes nobody.
        const std::string mine = impl->id + ":w";
        if (message.substr(0, mine.size()) != mine) return;
        for (Waiter* w : room->waiters) {
            if (w->id == message) target = w;
        }
        // The named waiter left meanwhile: the oldest local one re-checks in its place.
        if (!target) target = room->waiters.front();
    } else if (message != "r" && message != "w" && message != "l") {
        return;  // B5: only the rw release/leave messages wake this name's waiters
    }
    if (target) {
        target->woken = true;
        target->cv.notify_one();
        impl->stats.wakeups.fetch_add(1);
        return;
    }
    for (Waiter* w : room->waiters) {
        w->woken = true;
        w->cv.notify_one();
    }
    impl->stats.wakeups.fetch_add(room->waiters.size());
}

void RedisLockClient::Impl::wake_everyone() {
    std::vector<std::shared_ptr<Room>> all;
    {
        MutexLock lock(rooms_mutex);
        for (const auto& [c, r] : rooms) all.push_back(r);
    }
    for (const auto& r : all) {
        MutexLock lock(r->mutex);
        for (Waiter* w : r->waiters) {
            w->woken = true;
            w->cv.notify_one();
        }
        stats.wakeups.fetch_add(r->waiters.size());
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
        MutexLock lock(impl_->rooms_mutex);
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
