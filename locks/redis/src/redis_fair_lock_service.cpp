// RedisFairLockService: the fair mutex's acquire / wait / release flow over fair_lock_scripts,
// the wait rooms that deliver grants, the watchdog that renews its holds, and the read-write
// locks delegated to RedisLockService.
//
// Grant on release (fair_lock_scripts.cpp): a release hands the lock to the oldest live waiter
// on the server, in the same script, and tells it "<waiter id> <token>"; the woken waiter runs no
// script. A hand-over between two threads therefore costs the release's round trip and the
// message's delivery (for a waiter of the releasing service, not even the message: the script
// returns the grant and the releaser hands it over in-process).
#include "lockstep/locks/redis_fair_lock_service.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <cstdint>
#include <map>
#include <string_view>
#include <thread>
#include <vector>

#include "fair_lock_scripts.h"
#include "wait_rooms.h"
#include "hold_table.h"
#include "hold_table_mutex.h"
#include "hold_timer.h"
#include "late_grant.h"
#include "lockstep/cache/redis_time.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/cache/redis_subscriber.h"
#include "lockstep/core/error.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/core/logging.h"
#include "lockstep/core/mutex.h"
#include "lockstep/core/names.h"
#include "lockstep/locks/lock_keys.h"
#include "lockstep/locks/redis_lock_service.h"

namespace lockstep {

using HoldRecord = locks_detail::Hold;  // lockstep::Hold is the movable value (hold.h)
using locks_detail::HoldKind;
using locks_detail::SteadyClock;
using locks_detail::SteadyTime;
using namespace std::chrono_literals;

namespace {

std::string ms(std::chrono::milliseconds d) { return std::to_string(d.count()); }

// How long a name's room keeps its subscription after its last local waiter left: a name that
// is contended again soon (the usual case) queues its next waiter in one round trip.
constexpr auto kRoomLinger = 2s;

struct FairKeys {
    FairKeys(const std::string& prefix, const std::string& name) : k(prefix, name) {}
    LockKeys k;
    std::string lock() const { return k.stem() + ":fair"; }
    std::string queue() const { return k.stem() + ":fair:q"; }
    std::string queue_expiry() const { return k.stem() + ":fair:qx"; }
    std::string channel_prefix() const { return k.stem() + ":fair:ch:"; }
    std::vector<std::string> all() const { return {lock(), queue(), queue_expiry(), k.fence()}; }
};

std::optional<FenceToken> parse_token(std::string_view s) {
    FenceToken t = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), t);
    if (ec != std::errc() || p != s.data() + s.size() || t <= 0) return std::nullopt;
    return t;
}

// A grant this service received for a waiter it no longer has (its leave failed, or the waiter
// took the lock by a re-check with a fresh token before the message came): undone by the
// watchdog with the leave script, which hands it on only if the lock still holds exactly it.
struct Orphan {
    std::string name;
    std::string waiter;
    std::string value;  // "<waiter>#<token>"
};

}  // namespace

struct RedisFairLockService::State : locks_detail::HoldBackend {
    std::string_view backend_name() const noexcept override { return "redis-fair"; }
    State(RedisOptions r, LockServiceOptions o, RedisFairLockOptions f)
        : redis_options(r), prefix(o.prefix), fair(f), table(locks_detail::random_hex_id(), o.on_lost, *this) {
        if (redis_options.pool_size < 16) redis_options.pool_size = 16;
        redis = std::make_unique<RedisClient>(redis_options);
        rw = std::make_unique<RedisLockService>(redis_options, std::move(o));
    }
    // The rooms' handlers point at this State: every subscription ends before the rest goes.
    ~State() override { rooms.drop_all(); }

    RedisOptions redis_options;
    std::string prefix;
    RedisFairLockOptions fair;
    locks_detail::HoldTable table;
    std::unique_ptr<RedisClient> redis;
    std::unique_ptr<RedisLockService> rw;
    std::atomic<std::uint64_t> attempts{0};

    // One room per name this service waits on (wait_rooms.h); a room keeps its subscription for
    // kRoomLinger after its last waiter (the watchdog drops it then).
    WaitRooms rooms{[this]() -> RedisSubscriber& { return redis->subscriber(); }, kRoomLinger};

    Mutex orphans_mu;
    std::vector<Orphan> orphans GUARDED_BY(orphans_mu);

    // A hold's state: its value in the lock key, until when the server keeps it for sure (the
    // last successful renewal's send time + lease, or the acquisition's), and when the watchdog
    // looks at it next. Written by the acquiring thread before the hold is registered, then by
    // the watchdog only.
    struct FairHold {
        std::string value;
        std::atomic<SteadyTime> valid_until;
        SteadyTime next_renew{};  // a third into the lease; after a failed renewal, sooner
        SteadyTime first_due{};   // next_renew at acquisition; never written after (registered())
        bool failing = false;      // the last renewal failed (watchdog only) ...
        std::string last_failure;  // ... with this error
        // The holder began its unlock: a renewal in flight that finds the key gone (deleted by
        // the release) or fails is not a loss.
        std::atomic<bool> released{false};
        std::vector<std::string> keys;  // FairKeys::all() of the name, built once at acquisition
        std::string channel_prefix;     // for the release, which passes views of both
    };
    static FairHold& fair_hold(const HoldRecord& h) { return *static_cast<FairHold*>(h.state.get()); }

    // The watchdog: each hold is renewed a third into its lease (its own, not the shortest lease
    // of the service: with one period for all, one short-lease hold made the watchdog renew every hold
    // every 5 ms for the service's life), a fixed lease's end is reported when it comes.
    locks_detail::HoldTimer watchdog;
    // A new hold is registered (HoldTable): the watchdog is woken only if it is due before the
    // watchdog's planned wake-up.
    // (first_due, not next_renew: the watchdog may already be renewing the hold.)
    void registered(const HoldRecord& h) noexcept override { watchdog.hold_added(fair_hold(h).first_due); }

    bool acquire(HoldRecord& h, SteadyTime deadline) override {
        FairKeys keys(prefix, h.name);
        std::vector<std::string> k = keys.all();  // kept by the hold for its release (done())
        const std::array<std::string_view, 4> key_views{k[0], k[1], k[2], k[3]};
        const std::string lease_arg = ms(h.lease), grace_arg = ms(fair.waiter_grace),
                          fence_ttl_arg = ms(fair.fence_counter_ttl);
        RoomWaiter w;
        w.id = h.owner + ":w" + std::to_string(attempts.fetch_add(1)) + ":" + lease_arg;
        SteadyTime sent{};  // when the last script was sent: the server set any lease after it
        auto attempt = [&](bool queue) {
            fault::point("locks.fair.attempt");  // tests: count a waiter's scripts, hold its re-check
            sent = SteadyClock::now();
            const std::array<std::string_view, 5> args{w.id, lease_arg, grace_arg, queue ? "1" : "0", fence_ttl_arg};
            auto r = redis->eval_views(fair_scripts::acquire(), key_views, args);
            fault::point("locks.fair.after_attempt");  // tests: the script ran, its reply is lost
            r.throw_if_error();
            return std::pair<bool, long long>{r.elements().at(0).integer() == 1, r.elements().at(1).integer()};
        };
        // `leased_from`: a time at or before the server set the hold's lease (a script's send time),
        // or, for a grant by message, its arrival (late by the message's latency at most). The
        // lock key's value: the waiter id when this waiter's script took the lock, "<id>#<token>"
        // when a release granted it (fair_lock_scripts.cpp).
        enum class By { Script, Grant };
        auto done = [&](FenceToken token, SteadyTime leased_from, By by) {
            h.token = token;
            h.key = keys.lock();
            auto state = std::make_shared<FairHold>();
            state->value = by == By::Script ? w.id : w.id + "#" + std::to_string(token);
            state->valid_until.store(leased_from + h.lease);
            h.valid_until.store(locks_detail::valid_until_from(leased_from, h.lease));
            state->next_renew = h.renew ? leased_from + h.lease / 3 : leased_from + h.lease;
            state->first_due = state->next_renew;
            state->keys = std::move(k);  // the last use of k (and of key_views) in this acquisition
            state->channel_prefix = keys.channel_prefix();
            h.state = std::move(state);
            return true;
        };
        // L12: a grant by message is counted from the release that made it, which the waiter
        // cannot see (the message may have spent most of the lease in flight). So the waiter
        // confirms it with a renewal of its own before lock() returns, and counts its validity
        // from that renewal's send time; a grant whose lease ran out in flight finds the key gone
        // (or someone else's) and is not a hold. Returns the renewal's send time when confirmed.
        auto confirm_grant = [&](FenceToken token) -> std::optional<SteadyTime> {
            const auto confirm_sent = SteadyClock::now();
            fault::point("locks.fair.before_confirm");  // tests: a grant that arrives late
            auto r = redis->eval(fair_scripts::renew(), {keys.lock()}, {w.id + "#" + std::to_string(token), lease_arg});
            r.throw_if_error();
            if (r.integer() == 0) return std::nullopt;
            return confirm_sent;
        };
        // L11 (late_grant.h, the rule and give-back of every Redis lock): a reply that came
        // back after the validity it would start had ended is no hold. What it took is given
        // back (the leave script frees a hold that is this attempt's, whether taken by its
        // script or granted) and the acquisition goes on.
        auto arrived_late = [&](SteadyTime leased_from) {
            if (!arrived_after_validity(leased_from, h.lease)) return false;
            give_back_late_grant(h.name, "redis fair mutex", [&] { leave(keys, h.name, w.id, ""); });
            return true;
        };
        const bool can_wait = SteadyClock::now() < deadline;
        // A try first (acquired only if the lock is free and nobody waits: no barging), unless
        // this service already listens on the name: then the first attempt joins the line at
        // once (one round trip), as the subscription that must precede queuing (L7) exists.
        if (!can_wait || !has_room(h.name)) {
            std::pair<bool, long long> tried;
            try {
                tried = attempt(false);
            } catch (...) {
                // The script may have run and taken the lock (a reply lost to a timeout or a
                // dropped connection): the leave script frees or hands on a hold that is this
                // attempt's, so it does not stay held, unrenewed, for a whole lease.
                leave_after_error(keys, h.name, w.id);
                throw;
            }
            auto [got, value] = tried;
            if (got && !arrived_late(sent)) return done(value, sent, By::Script);
            if (!can_wait || SteadyClock::now() >= deadline) return false;
        }
        std::shared_ptr<WaitRoom> room = join_room(keys, h.name, w);
        bool in_room = true;
        auto take_out = [&]() -> std::optional<FenceToken> {  // leaves the room; a grant that came
            if (!in_room) return std::nullopt;                 // meanwhile is returned
            in_room = false;
            return leave_room(room, w);
        };
        try {
            for (;;) {
                auto [got, value] = attempt(true);
                if (got && !arrived_late(sent)) {
                    // Taken by this script (a free lock, or a grant whose message is lost or late:
                    // the script drew a fresh token). A message still in flight is undone by
                    // value, which no longer matches: harmless.
                    take_out();
                    return done(value, sent, By::Script);
                }
                // Given back as late: re-check at once, after the deadline check below (a
                // network slower than the lease must not keep the caller past its deadline).
                if (got) value = 1;
                // Until granted, or before our place in line would expire (grace/2), or when the
                // holder's lease ends, whichever is first; then re-check.
                auto next = SteadyClock::now() + std::min<std::chrono::milliseconds>(
                                                      fair.waiter_grace / 2, std::chrono::milliseconds(std::max(1LL, value)));
                next = std::min(next, deadline);
                {
                    MutexLock g(room->mutex);
                    while (!w.granted && !table.closed()) {
                        if (w.cv.wait_until(room->mutex, next) == std::cv_status::timeout) break;
                    }
                }
                table.throw_if_closed();  // woken by close(): the catch below leaves the line
                if (SteadyClock::now() >= deadline) {
                    if (auto token = take_out()) {  // granted at the last moment
                        if (auto confirmed = confirm_grant(*token); confirmed && !arrived_late(*confirmed)) {
                            return done(*token, *confirmed, By::Grant);
                        }
                    }
                    fault::point("locks.fair.leaving");
                    // A grant made after we left the room is undone here (the script sees it).
                    leave(keys, h.name, w.id, "");
                    return false;
                }
                if (auto token = take_out_if_granted(room, w, in_room)) {
                    if (auto confirmed = confirm_grant(*token); confirmed && !arrived_late(*confirmed)) {
                        return done(*token, *confirmed, By::Grant);
                    }
                    // The grant's lease ran out before it reached us (or its confirmation came
                    // back too late): back in line.
                    {
                        MutexLock g(room->mutex);
                        w.granted = false;
                        w.token = 0;
                    }
                    room = join_room(keys, h.name, w);
                    in_room = true;
                }
            }
        } catch (...) {
            const bool granted = take_out().has_value();
            (void)granted;  // granted or not: the leave script undoes any grant to this waiter
            leave_after_error(keys, h.name, w.id);
            throw;
        }
    }

    // An acquisition that failed with an error leaves the line and gives up any hold its
    // attempt may have got (taken by its script, or granted). Best effort: if Redis cannot be
    // reached either, the waiter's grace ends its place in line and the lease ends a hold.
    void leave_after_error(const FairKeys& keys, const std::string& name, const std::string& waiter) noexcept {
        try {
            leave(keys, name, waiter, "");
        } catch (const std::exception& e) {
            logger()->warn("fair lock '{}': leaving after an error failed ({}); the waiter's grace and the lease end "
                           "what it left", name, e.what());
        }
    }

    // The waiter's grant, if one came: then it leaves the room (it holds the lock).
    std::optional<FenceToken> take_out_if_granted(const std::shared_ptr<WaitRoom>& room, RoomWaiter& w, bool& in_room) {
        {
            MutexLock g(room->mutex);
            if (!w.granted) return std::nullopt;
        }
        in_room = false;
        return leave_room(room, w);
    }

    bool has_room(const std::string& name) { return rooms.find(name) != nullptr; }

    // Registers `w` in the name's room, subscribing the room's channel first if it is new; returns
    // once the server confirmed the subscription (L7: a grant published after this is delivered).
    std::shared_ptr<WaitRoom> join_room(const FairKeys& keys, const std::string& name, RoomWaiter& w) {
        return rooms.join(name, keys.channel_prefix() + table.service_id(),  // under the name's hash tag
                          w, [this](WaitRoom& room, std::string_view message) { on_grant(room, message); });
    }

    // Takes `w` out of its room; returns the grant it got meanwhile, if any.
    std::optional<FenceToken> leave_room(const std::shared_ptr<WaitRoom>& room, RoomWaiter& w) {
        rooms.leave(room, w);
        // Out of the room: no handler touches `w` any more, its flags are read without the lock.
        if (w.granted) return w.token;
        return std::nullopt;
    }

    // On the subscriber thread: "<waiter id> <token>" names the waiter that now holds the lock.
    void on_grant(WaitRoom& room, std::string_view message) EXCLUDES(orphans_mu) {
        try {
            fault::point("locks.fair.grant_message");  // tests: a message lost on the way
        } catch (...) {
            return;
        }
        const auto space = message.find(' ');
        if (space == std::string_view::npos) return;
        const std::string_view id = message.substr(0, space);
        const auto token = parse_token(message.substr(space + 1));
        const std::string& sid = table.service_id();
        // B5: anything but a grant to one of this service's waiters wakes nobody.
        if (!token || id.size() <= sid.size() || id.substr(0, sid.size()) != sid || id[sid.size()] != ':') return;
        {
            MutexLock g(room.mutex);
            for (RoomWaiter* x : room.waiters) {
                if (x->id == id) {
                    x->granted = true;
                    x->token = *token;
                    x->cv.notify_one();
                    return;
                }
            }
        }
        {
            MutexLock g(orphans_mu);
            orphans.push_back({room.key, std::string(id), std::string(message.substr(0, space)) + "#" +
                                                               std::string(message.substr(space + 1))});
        }
        watchdog.poke();
    }

    // A grant a script returned instead of publishing it (the waiter is this service's): handed to
    // the waiter in-process, or undone at once if that waiter is no longer here. Never throws.
    void deliver(const FairKeys& keys, const std::string& name, RedisReply r) {
        try {
            for (int i = 0; i < 64 && r.type() == RedisReply::Type::Array; ++i) {
                const std::string id = r.elements().at(0).str();
                const std::string tok = r.elements().at(1).str();
                const auto token = parse_token(tok);
                std::shared_ptr<WaitRoom> room = rooms.find(name);
                if (room && token) {
                    MutexLock g(room->mutex);
                    for (RoomWaiter* x : room->waiters) {
                        if (x->id == id) {
                            x->granted = true;
                            x->token = *token;
                            x->cv.notify_one();
                            return;
                        }
                    }
                }
                r = leave(keys, name, id, id + "#" + tok);
            }
        } catch (const std::exception& e) {
            logger()->warn("fair lock '{}': handing a grant on failed ({}); its lease ends it", name, e.what());
        }
    }

    // Runs the leave script for `waiter` (exact: undo only that grant; "": any grant to it) and
    // returns its reply (a grant for this service's waiter to deliver, or 1).
    RedisReply leave(const FairKeys& keys, const std::string& name, const std::string& waiter, const std::string& exact) {
        auto r = redis->eval(fair_scripts::leave(), keys.all(),
                             {waiter, keys.channel_prefix(), ms(fair.fence_counter_ttl), table.service_id(), exact});
        r.throw_if_error();
        if (exact.empty() && r.type() == RedisReply::Type::Array) {
            deliver(keys, name, std::move(r));
            return RedisReply::integer(1);
        }
        return r;
    }

    bool release(HoldRecord& h) override {
        FairHold& fh = fair_hold(h);
        fh.released.store(true);
        const std::array<std::string_view, 4> key_views{fh.keys[0], fh.keys[1], fh.keys[2], fh.keys[3]};
        const std::string fence_ttl_arg = ms(fair.fence_counter_ttl);
        const std::array<std::string_view, 4> args{fh.value, fh.channel_prefix, fence_ttl_arg, table.service_id()};
        auto r = redis->eval_views(fair_scripts::release(), key_views, args);
        r.throw_if_error();
        if (r.type() == RedisReply::Type::Array) {
            deliver(FairKeys(prefix, h.name), h.name, std::move(r));  // the next holder is a thread of this service
            return true;
        }
        return r.integer() == 1;
    }

    // A lost hold may still have its key (a hold given up by close(), or one whose validity
    // ended while the server still keeps it): the release script deletes it only if it is still
    // exactly this hold's (and hands the lock on to the next waiter), so it is safe whatever
    // happened meanwhile. Once per hold; best effort.
    void abandon(HoldRecord& h) noexcept override {
        if (!h.state) return;
        FairHold& fh = fair_hold(h);
        if (fh.released.exchange(true)) return;  // a release went already
        try {
            const std::array<std::string_view, 4> key_views{fh.keys[0], fh.keys[1], fh.keys[2], fh.keys[3]};
            const std::string fence_ttl_arg = ms(fair.fence_counter_ttl);
            const std::array<std::string_view, 4> args{fh.value, fh.channel_prefix, fence_ttl_arg, table.service_id()};
            auto r = redis->eval_views(fair_scripts::release(), key_views, args);
            if (r.type() == RedisReply::Type::Array) deliver(FairKeys(prefix, h.name), h.name, std::move(r));
        } catch (const std::exception& e) {
            logger()->warn("fair lock '{}': giving up a lost hold failed ({}); its lease ends it", h.name, e.what());
        }
    }

    // The service's destructor (after the watchdog stopped): holds reported lost (ClientClosed)
    // and given up (abandon), waiters woken; they leave the line with LockClientClosedError.
    void close() {
        table.close(*this);
        rooms.wake_everyone();  // each sees table.closed() and leaves the line
    }

    // One watchdog pass (HoldTimer): the holds that are due are renewed (or, with a fixed
    // lease, reported when it ended), grants that reached a waiter no longer here are undone, idle
    // rooms dropped. Returns when the next hold is due.
    SteadyTime watchdog_pass() EXCLUDES(orphans_mu) {
        std::vector<Orphan> undo;
        {
            MutexLock g(orphans_mu);
            undo.swap(orphans);
        }
        SteadyTime next = SteadyTime::max();
        for (const auto& h : table.all()) {
            if (h->lost.load() || !h->state) continue;
            FairHold& fh = fair_hold(*h);
            if (fh.released.load()) continue;
            if (SteadyClock::now() >= fh.next_renew) {
                renew(h, fh);
                try {
                    fault::point("locks.fair.renewed");  // tests: a renewal's outcome was handled
                } catch (...) {
                }
            }
            if (!h->lost.load()) next = std::min(next, fh.next_renew);
        }
        for (const auto& o : undo) {
            FairKeys keys(prefix, o.name);
            deliver(keys, o.name, RedisReply::array({RedisReply::string(o.waiter), RedisReply::string(
                                                         o.value.substr(o.waiter.size() + 1))}));
        }
        rooms.drop_idle();
        return next;
    }

    // A hold that is due: renewed a third into its lease again, or reported lost.
    void renew(const std::shared_ptr<HoldRecord>& h, FairHold& fh) {
        // LockOptions::renew = false: a fixed lease, never extended; reported when it ends (as
        // RedisMutex does), whether or not the key is still there. (Due only at its end.)
        if (!h->renew) {
            table.report_lost(h, LockLossReason::LeaseEnded, "fixed lease ran out before unlock");
            return;
        }
        const auto sent = SteadyClock::now();
        // Renewals kept failing until the last lease the server granted ran out: reported now,
        // not after one more renewal that may hang for the socket timeout (L5: the holder must
        // not believe in the hold past that lease).
        if (fh.failing && sent >= fh.valid_until.load()) {
            table.report_lost(h, LockLossReason::Unreachable,
                              "no renewal succeeded for a whole lease: " + fh.last_failure);
            return;
        }
        try {
            fault::point("locks.fair.before_renew");  // tests: a renewal that cannot reach Redis
            auto r = redis->eval(fair_scripts::renew(), {h->key}, {fh.value, ms(h->lease)});
            r.throw_if_error();
            if (r.integer() == 0) {
                if (fh.released.load()) return;  // the holder's unlock deleted it meanwhile
                table.report_lost(h, LockLossReason::Expired, "a renewal found the hold gone");
            } else {
                fh.valid_until.store(sent + h->lease);
                locks_detail::HoldTable::extend(*h, sent);
                fh.next_renew = sent + h->lease / 3;
                fh.failing = false;
            }
        } catch (const std::exception& e) {
            // L5: past the last lease the server granted, the hold must be presumed gone (another
            // client may hold the lock by now); before it, try again soon, and once more at the
            // lease's end at the latest, so that the loss is reported on time.
            if (fh.released.load()) return;
            const auto now = SteadyClock::now();
            const auto valid_until = fh.valid_until.load();
            if (now >= valid_until) {
                table.report_lost(h, LockLossReason::Unreachable,
                                  std::string("no renewal succeeded for a whole lease: ") + e.what());
            } else {
                logger()->warn("fair lock '{}': renewal failed, retrying: {}", h->name, e.what());
                fh.failing = true;
                fh.last_failure = e.what();
                const auto retry = std::clamp<SteadyClock::duration>(h->lease / 10, std::chrono::milliseconds(1), 1s);
                fh.next_renew = std::min(now + retry, valid_until);
            }
        }
    }
};

RedisFairLockService::RedisFairLockService(RedisOptions redis, LockServiceOptions options, RedisFairLockOptions fair)
    : state_(std::make_shared<State>(std::move(redis), std::move(options), fair)) {
    if (fair.waiter_grace < 2ms) throw ConfigError("waiter_grace", "must be at least 2ms");
    state_->watchdog.start([s = state_.get()] { return s->watchdog_pass(); });
}

RedisFairLockService::~RedisFairLockService() {
    state_->watchdog.stop();
    state_->close();
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

std::chrono::system_clock::time_point RedisFairLockService::server_time() {
    return redis_server_time(*state_->redis);
}

}  // namespace lockstep
