// The acquire flow of every Redis lock side (mutex, rw read, rw write), as named stages:
// acquire() chooses the path; reenter() (L6); try_fresh(), one plain or queuing try;
// register_hold(), the new hold enters the registry; wait_for_turn() (L7, L9), join the wait
// room, queuing try, sleep until a release names this waiter or the re-check time. What differs
// between sides (keys, script, hand-off arguments, wake rule) was fixed once when the lock
// object built its LockSide (redis_mutex.cpp, redis_read_write_lock.cpp), so nothing here tests
// the lock's kind. The fair mutex (fair_mutex_side.cpp) is one more side: its waiters are made
// holders by a release's grant message (WakeRule::Grant, take_grant()).
#include <algorithm>
#include <utility>

#include "lock_client_impl.h"
#include "late_grant.h"  // L11: one rule and one give-back for every Redis lock
#include "replication_wait.h"  // L8: WAIT, failover (confirm_new_hold)
#include "lockstep/core/error.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/core/logging.h"
#include "lockstep/locks/lock_errors.h"

namespace lockstep {

AttemptResult parse_attempt(const RedisReply& reply) {
    const auto& e = reply.elements();
    if (e.empty()) throw ProtocolError("lock acquire script returned an empty array");
    AttemptResult r;
    r.status = static_cast<AttemptStatus>(e[0].integer());
    if (e.size() > 1) r.value = e[1].integer();
    if (e.size() > 2 && r.status == AttemptStatus::Acquired) {
        r.granted_at_us = e[2].integer();
    } else if (e.size() > 2) {
        // The mutex script answers the score as an integer, the older form as a string.
        r.queue_score =
            e[2].type() == RedisReply::Type::Integer ? std::to_string(e[2].integer()) : e[2].str();
    }
    return r;
}

namespace {

using std::chrono::milliseconds;

long long ms_until(SteadyTime t, SteadyTime now) {
    if (t <= now) return 0;
    return std::chrono::ceil<milliseconds>(t - now).count();
}

// One acquire script, with its fault points and counters. A connection error after the script
// was sent may mean it ran (its reply lost): a fresh acquisition then gives back whatever it may
// have created (its owner is unique to this acquisition and it holds nothing locally, so that
// is safe), and the lease bounds the damage if even that fails.
AttemptResult attempt_once(RedisLockClient::Impl& impl, const LockSide& side, const std::string& owner,
                           milliseconds lease, bool expect_held, const WaitTicket* ticket) {
    fault::point(side.fault_points().before_acquire);
    impl.stats.acquire_attempts.fetch_add(1);
    AttemptResult r;
    try {
        r = side.attempt(owner, lease, expect_held, ticket);
        fault::point(side.fault_points().after_acquire);  // tests: the script ran, its reply is lost
    } catch (const ConnectionError&) {
        if (!expect_held) {
            try {
                side.give_back(owner);
            } catch (const std::exception& e) {
                logger()->warn("lock '{}': could not clean up after a failed acquire: {}", side.name(),
                               e.what());
            }
        }
        throw;
    }
    return r;
}

// When a busy waiter tries again if no message wakes it first: when the holder's lease ends
// (r.value ms) +1 ms, as the server expires a key only once its expiry time has passed. At the
// latest after claim_refresh: a wake-up sent to a waiter that cannot take it (a frozen process at
// the head of the queue, a lost message) leaves a free lock untaken for at most that long, not
// for the holder's whole lease.
SteadyTime recheck_at(const AttemptResult& r, SteadyTime now, SteadyTime deadline, milliseconds claim_refresh) {
    const long long recheck = std::min<long long>(std::max(0LL, r.value), claim_refresh.count());
    return std::min(deadline, now + milliseconds(recheck) + milliseconds(1));
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
    const std::string owner;  // the hold's owner value: "<thread owner>:<hold number>"
    const std::string hid;    // hold_id(side->hold_key(), the owner key's string)
    const bool movable;       // the owner is a movable Hold, not the calling thread
    const SteadyTime started = SteadyClock::now();  // stats.acquire_latency
    std::shared_ptr<RedisHold> hold;  // set by register_hold: the new hold
};

// The flow: re-entry (L6), else a fresh try, else wait for a turn (L7, L9). A thread whose
// client already listens on the lock's channel (another of its threads waits there) goes
// straight to the queuing try: a plain try would only find the lock busy and cost one more
// script per acquisition.
bool RedisLockClient::Impl::acquire(const std::shared_ptr<const LockSide>& side,
                                    std::optional<SteadyTime> deadline, OwnerKey owner_key,
                                    std::shared_ptr<RedisHold>* acquired) {
    Use use(*this);
    // The owner key (the calling thread, or a movable Hold) finds its holds; each new hold carries
    // it and a hold number of its own as its owner value in Redis, so that a script of an earlier
    // hold that arrives late (a release or renewal delayed past the lease) finds a stranger.
    const std::string key_owner = owner_of(owner_key);
    std::string hid = hold_id(side->hold_key(), key_owner);
    // A hold of the lock's other side by the same owner lends its owner value (a downgrade).
    const std::string sibling = side->sibling_hold_key();
    std::string owner;
    {
        MutexLock lock(mutex);
        auto it = holds.find(hid);
        if (it != holds.end()) {
            owner = it->second->owner;
        } else if (!sibling.empty()) {
            auto s = holds.find(hold_id(sibling, key_owner));
            if (s != holds.end()) owner = s->second->owner;
        }
    }
    if (owner.empty()) owner = side->owner_value(key_owner + ":" + std::to_string(hold_numbers.fetch_add(1) + 1));
    Acquisition a{side, std::move(owner), std::move(hid), owner_key.movable};
    const bool got = acquire_stages(a, deadline);
    if (got && acquired) *acquired = a.hold;
    return got;
}

bool RedisLockClient::Impl::acquire_stages(Acquisition& a, std::optional<SteadyTime> deadline) {
    const std::shared_ptr<const LockSide>& side = a.side;
    std::shared_ptr<RedisHold> held;
    {
        MutexLock lock(mutex);
        absorb_one_unlock.erase(a.hid);
        auto it = holds.find(a.hid);
        if (it != holds.end()) held = it->second;
    }
    if (held) return reenter(a, held);  // L6: re-entry never waits at the local gate

    const auto started = SteadyClock::now();
    const bool logging = logger()->should_log(spdlog::level::debug);
    if (logging) lock_log(spdlog::level::debug, side->name(), log_tag(*side), "acquire started");
    GatePass pass;  // leaves the gate however this acquisition fails (false, a throw)
    if (LocalGate* gate = side->gate()) {
        bool seized = false;
        if (!pass_gate(a, *gate, deadline, pass, seized)) {
            if (logging) {
                lock_log(spdlog::level::debug, side->name(), log_tag(*side),
                         "gave up after {} ms (behind a holder in this process)", elapsed_ms(started));
            }
            return false;
        }
        if (seized) {
            // A probe at the gate acquired the lock already (the gate's owner had lost it).
            MutexLock lock(mutex);
            a.hold->gate_pass = std::move(pass);
            return true;
        }
    }
    if (!acquire_fresh(a, deadline)) {
        if (logging) lock_log(spdlog::level::debug, side->name(), log_tag(*side), "gave up after {} ms", elapsed_ms(started));
        return false;
    }
    if (logging) {
        lock_log(spdlog::level::debug, side->name(), log_tag(*side), "granted after {} ms, token {}", elapsed_ms(started),
                 a.hold->token);
    }
    if (pass) {
        // The hold keeps the gate until it is forgotten (redis_release.cpp forget()).
        MutexLock lock(mutex);
        a.hold->gate_pass = std::move(pass);
    }
    return true;
}

// The local gate: true once passed (`pass` set); false at the deadline (try_lock(): at once)
// while another thread of this client holds or acquires the lock. A waiter asks Redis itself
// every claim_refresh (a plain try, keeping its place): the owner's hold may be gone (lease ran
// out, deleted from outside) and then the lock is free for everybody, local threads included,
// as it was without the gate. If that try acquires, the waiter seizes the gate (`seized`).
bool RedisLockClient::Impl::pass_gate(Acquisition& a, LocalGate& gate, std::optional<SteadyTime> deadline,
                                      GatePass& pass, bool& seized) {
    const LockSide& side = *a.side;
    // The probe's state behind one pointer: a lambda of one pointer fits std::function's small
    // buffer, so an acquisition (uncontended included) allocates nothing for a probe that only a
    // waiting thread ever runs.
    struct ProbeState {
        Impl* impl;
        Acquisition* acquisition;
        bool* seized;
    } state{this, &a, &seized};
    LocalGate::Probe probe;
    probe.every = std::chrono::duration_cast<std::chrono::microseconds>(options.claim_refresh);
    probe.probe = [s = &state] {
        AttemptResult r;
        *s->seized = s->impl->try_fresh(*s->acquisition, nullptr, r);
        return *s->seized;
    };
    std::uint64_t passage = 0;
    switch (gate.enter(deadline, &stats.gate_waits, &passage, &probe)) {
        case LocalGate::Entry::Entered:
            pass = GatePass(&gate, passage);
            return true;
        case LocalGate::Entry::TimedOut:
            return false;
        case LocalGate::Entry::Closed:
            break;
    }
    throw LockClientClosedError("lock '" + side.name() + "': the lock client was destroyed while this thread waited");
}

// A fresh acquisition in Redis: a try, else wait for a turn (L7, L9).
bool RedisLockClient::Impl::acquire_fresh(Acquisition& a, std::optional<SteadyTime> deadline) {
    const LockSide& side = *a.side;
    const bool may_wait = deadline && SteadyClock::now() < *deadline;
    if (!may_wait || !listening_on(side.wait_channel())) {
        AttemptResult r;
        if (try_fresh(a, nullptr, r)) return true;
        if (!deadline || SteadyClock::now() >= *deadline) return false;
    }
    return wait_for_turn(a, *deadline);
}

// L6: re-entry. It still goes to Redis: that refreshes the lease and notices a lost hold.
bool RedisLockClient::Impl::reenter(Acquisition& a, const std::shared_ptr<RedisHold>& held) {
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
        held->valid_until = std::max(held->valid_until, locks_detail::valid_until_from(sent, held->lease));
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
void RedisLockClient::Impl::register_hold(Acquisition& a, SteadyTime sent, const AttemptResult& granted,
                                          std::string_view value) {
    const HoldSettings& settings = a.side->settings();
    auto h = std::make_shared<RedisHold>();
    h->side = a.side;
    h->owner = value.empty() ? a.owner : std::string(value);
    h->lease = settings.lease;
    h->renew = settings.renew;
    h->count = 1;
    h->token = granted.value;
    h->granted_at_us = granted.granted_at_us;
    h->valid_until = locks_detail::valid_until_from(sent, settings.lease);
    h->next_check = settings.renew ? sent + settings.lease / 3 : h->valid_until;
    h->movable = a.movable;
    if (a.movable) h->stop = std::stop_source();
    stats.acquired.fetch_add(1);
    h->acquired_at = SteadyClock::now();
    if (settings.max_hold) {
        // The watchdog ends the hold at its cap: its first check comes no later.
        h->cap = h->acquired_at + *settings.max_hold;
        h->next_check = std::min(h->next_check, h->cap);
    }
    stats.acquire_latency.record(h->acquired_at - a.started);
    const SteadyTime first_check = h->next_check;
    const SteadyTime valid_until = h->valid_until;
    {
        MutexLock lock(mutex);
        a.hold = h;
        holds[a.hid] = std::move(h);
    }
    // After the registration, never before: a pass that ran before it would not have seen the
    // hold. Each timer is woken only if the hold is due before its planned wake-up.
    watchdog.hold_added(first_check);
    expiry.hold_added(valid_until);
}

void RedisLockClient::Impl::give_back_late_grant(const LockSide& side, const std::string& owner) noexcept {
    stats.late_grants.fetch_add(1);
    lockstep::give_back_late_grant(side.name(), log_tag(side), [&] { side.release(owner, true); });
}

// One fresh attempt (plain, or queuing with `ticket`); true when acquired, false when busy.
bool RedisLockClient::Impl::try_fresh(Acquisition& a, const WaitTicket* ticket, AttemptResult& out) {
    const LockSide& side = *a.side;
    for (int tries = 0;; ++tries) {
        const SteadyTime sent = SteadyClock::now();
        out = attempt_once(*this, side, a.owner, side.settings().lease, false, ticket);
        switch (out.status) {
            case AttemptStatus::Acquired:
                if (arrived_after_validity(sent, side.settings().lease)) {
                    // L11 (late_grant.h): no hold; given back, and the caller goes on as if the
                    // lock were busy, until its deadline.
                    give_back_late_grant(side, a.owner);
                    out = AttemptResult{AttemptStatus::Busy, 1, out.queue_score};
                    return false;
                }
                register_hold(a, sent, out);
                if (!confirm_new_hold(*this, side, a.owner, a.hid, sent)) continue;  // L8 (replication_wait.h)
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

// WakeRule::Grant. L12: a grant by message is counted from the release that made it, which the
// waiter cannot see (the message may have spent most of the lease in flight). So the waiter
// confirms it with a renewal of its own (the side's confirm_grant) before lock() returns, and
// counts its validity from that renewal's send time; a grant whose lease ran out in flight finds
// the key gone (or someone else's) and is not a hold. A confirmation that comes back after its
// validity is given back (L11).
bool RedisLockClient::Impl::take_grant(Acquisition& a, FenceToken token) {
    const LockSide& side = *a.side;
    const SteadyTime sent = SteadyClock::now();
    const std::optional<std::string> value = side.confirm_grant(a.owner, token);
    if (!value) return false;
    if (arrived_after_validity(sent, side.settings().lease)) {
        give_back_late_grant(side, *value);
        return false;
    }
    AttemptResult granted;
    granted.status = AttemptStatus::Acquired;
    granted.value = token;
    register_hold(a, sent, granted, *value);
    return confirm_new_hold(*this, side, *value, a.hid, sent);  // L8 (replication_wait.h)
}

// L7: subscribe first, then a queuing try, then sleep until a release message or the re-check
// time, and again. The subscription is confirmed before the try, so a release published after
// the try reaches this waiter. A granting side's waiter (the fair mutex) may instead find itself
// made the holder by a release (take_grant): it runs no script for that.
bool RedisLockClient::Impl::wait_for_turn(Acquisition& a, SteadyTime deadline) {
    const LockSide& side = *a.side;
    const bool granting = side.wake_rule() == WakeRule::Grant;
    RoomWaiter waiter;
    // A grant names its waiter by the waiter's queue entry: the hold's owner value.
    waiter.id = granting ? a.owner : id + ":w" + std::to_string(next_waiter.fetch_add(1));
    std::shared_ptr<WaitRoom> room = join_room(a.side, waiter);
    bool in_room = true;
    const auto leave_room = [&] {
        if (!in_room) return;
        in_room = false;
        rooms.leave(room, waiter);
        // A lingering room (the fair mutex's) is dropped by the watchdog: it looks by then at the
        // latest (a wake-up only if it planned to sleep longer).
        if (side.room_linger().count() > 0) watchdog.hold_added(SteadyClock::now() + side.room_linger());
    };
    const milliseconds recheck_limit = side.recheck_limit().value_or(options.claim_refresh);
    WaitTicket ticket{waiter.id, "", -1};
    bool ticketed = false;
    AttemptResult r;
    // At the deadline: a granting side's waiter leaves its room first and takes a grant that came
    // at the last moment; then the waiter withdraws (a grant made after it left is undone by the
    // side's leave script).
    const auto give_up = [&] {
        if (granting) {
            leave_room();
            if (waiter.granted && take_grant(a, waiter.token)) return true;
        }
        ticketed = false;
        leave_quietly(side, a.owner, ticket);
        leave_room();
        return false;
    };
    try {
        for (;;) {
            room->arm(waiter);
            // After arming: close() sets `closed` before it wakes everyone.
            if (is_closed()) {
                throw LockClientClosedError("lock '" + side.name() + "': the lock client was destroyed while this thread waited");
            }
            const bool unbounded = deadline == SteadyTime::max();
            ticket.wait_left_ms = unbounded ? -1 : ms_until(deadline, SteadyClock::now());
            ticketed = true;
            if (try_fresh(a, &ticket, r)) {
                // A fair waiter's grant message still in flight names a value the script
                // replaced: harmless.
                leave_room();
                return true;
            }
            if (!r.queue_score.empty()) ticket.queue_score = r.queue_score;
            const SteadyTime now = SteadyClock::now();
            if (now >= deadline) return give_up();
            const SteadyTime wake_at = recheck_at(r, now, deadline, recheck_limit);
            fault::point("locks.wait.before_sleep");
            room->sleep(waiter, wake_at);
            fault::point("locks.wait.after_sleep");
            if (!granting) continue;
            if (const FenceToken granted = room->take_grant(waiter); granted != 0) {
                // Out of the line on the server: no other grant can name this waiter now.
                if (take_grant(a, granted)) {
                    leave_room();
                    return true;
                }
                // The grant's lease ran out before it reached us (or its confirmation came back
                // too late): back in line with the next try.
            }
            if (SteadyClock::now() >= deadline) return give_up();
        }
    } catch (...) {
        if (ticketed) leave_quietly(side, a.owner, ticket);
        leave_room();
        throw;
    }
}

}  // namespace lockstep
