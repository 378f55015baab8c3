// The watchdog (L5): one thread per lock client that renews every renewing hold a third into its
// lease, in one pipelined round trip for all holds due soon, and reports a hold lost when its
// renewal finds it gone, when no renewal succeeded for a whole lease, or when a fixed lease ran
// out before unlock. Its thread is a HoldTimer (hold_timer.h): it sleeps until the earliest
// check, and a new hold wakes it only when it needs an earlier one (register_hold,
// redis_acquire.cpp). The expiry pass runs on a second HoldTimer, so that a renewal stuck in a
// partition does not delay the report of a validity's end (L11). The watchdog also undoes the
// fair mutex's orphan grants and drops its lingering wait rooms (rooms_pass, redis_wait_rooms.cpp).
#include <algorithm>
#include <utility>

#include "lock_client_impl.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/core/logging.h"

namespace lockstep {

using std::chrono::milliseconds;

std::vector<RedisReply> run_pipelined(RedisClient& redis, const std::vector<ScriptCall>& calls) {
    std::vector<std::vector<std::string>> commands;
    commands.reserve(calls.size());
    for (const ScriptCall& c : calls) {
        std::vector<std::string> cmd{"EVALSHA", c.script->sha1(), std::to_string(c.keys.size())};
        cmd.insert(cmd.end(), c.keys.begin(), c.keys.end());
        cmd.insert(cmd.end(), c.args.begin(), c.args.end());
        commands.push_back(std::move(cmd));
    }
    std::vector<RedisReply> replies = redis.pipeline(commands);
    for (std::size_t i = 0; i < replies.size() && i < calls.size(); ++i) {
        if (replies[i].is_error() && replies[i].error_message().rfind("NOSCRIPT", 0) == 0) {
            const ScriptCall& c = calls[i];
            replies[i] = redis.eval(*c.script, c.keys, c.args);
        }
    }
    return replies;
}

SteadyTime RedisLockClient::Impl::watchdog_pass() {
    const SteadyTime rooms_next = rooms_pass();
    const SteadyTime now = SteadyClock::now();
    std::vector<std::shared_ptr<RedisHold>> due, capped;
    std::vector<std::pair<std::shared_ptr<RedisHold>, LockLoss>> ended;
    {
        MutexLock lock(mutex);
        const SteadyTime earliest = earliest_check_locked();
        // Woken for a hold due later than now (or for the rooms): nothing to renew yet.
        if (now < earliest) return std::min(earliest, rooms_next);
        for (const auto& [k, h] : holds) {
            if (!h->active || h->lost) continue;
            if (h->cap <= now) {
                if (auto loss = mark_lost_locked(*h, LockLossReason::MaxHoldReached,
                                                 "max_hold reached: the hold was ended")) {
                    ended.emplace_back(h, *loss);
                    capped.push_back(h);
                }
            } else if (!h->renew) {
                if (h->next_check <= now) {
                    if (auto loss = mark_lost_locked(*h, LockLossReason::LeaseEnded,
                                                     "fixed lease ran out before unlock")) {
                        ended.emplace_back(h, *loss);
                    }
                }
            } else if (now >= h->valid_until) {
                // Renewals failed up to its validity's end (the expiry pass is about to say so):
                // reported now, not after one more renewal that may hang (L5, L11).
                if (auto loss = mark_lost_locked(*h, LockLossReason::Unreachable,
                                                 "its validity ended: no renewal was acknowledged within the lease")) {
                    ended.emplace_back(h, *loss);
                }
            } else if (h->next_check <= now + h->lease / 12) {
                // Holds due soon ride along in this batch: one round trip for all of them.
                due.push_back(h);
            }
        }
    }
    for (const auto& [h, loss] : ended) report(h, loss);
    if (!capped.empty()) end_capped(capped);
    if (!due.empty()) renew_batch(std::move(due));
    MutexLock lock(mutex);
    return std::min(earliest_check_locked(), rooms_next);
}

SteadyTime RedisLockClient::Impl::earliest_check_locked() const {
    SteadyTime earliest = SteadyTime::max();
    for (const auto& [k, h] : holds) {
        if (h->active && !h->lost) earliest = std::min(earliest, h->next_check);
    }
    return earliest;
}

// L11: the watchdog reports a hold whose renewals failed once a renewal returns past its validity,
// and a renewal into a partition returns only at its socket timeout. This thread reports it at
// valid_until itself, as lost() already says, so on_lost and the stop token are on time too. A
// renewal acknowledged later finds the hold lost and leaves it so; the cap stays the watchdog's
// (it gives the keys back).
SteadyTime RedisLockClient::Impl::expiry_pass() {
    const SteadyTime now = SteadyClock::now();
    SteadyTime next = SteadyTime::max();
    std::vector<std::pair<std::shared_ptr<RedisHold>, LockLoss>> ended;
    {
        MutexLock lock(mutex);
        for (const auto& [k, h] : holds) {
            if (!h->active || h->lost) continue;
            if (h->valid_until > now) {
                next = std::min(next, h->valid_until);
                continue;
            }
            auto loss = h->renew ? mark_lost_locked(*h, LockLossReason::Unreachable,
                                                    "its validity ended: no renewal was acknowledged within the lease")
                                 : mark_lost_locked(*h, LockLossReason::LeaseEnded, "fixed lease ran out before unlock");
            if (loss) ended.emplace_back(h, *loss);
        }
    }
    for (const auto& [h, loss] : ended) report(h, loss);
    return next;
}

// max_hold: the holds at their cap were reported lost; their keys are given back now (the last
// release of each owner, in one pipeline) rather than a lease later. The owner's unlock then finds
// the hold gone (reported already: LockLostError from the checked variants only). Best effort: if
// Redis cannot be reached the lease ends the keys, as nothing renews them any more.
void RedisLockClient::Impl::end_capped(const std::vector<std::shared_ptr<RedisHold>>& capped) {
    std::vector<ScriptCall> calls;
    calls.reserve(capped.size());
    for (const auto& h : capped) calls.push_back(h->side->release_call(h->owner));
    try {
        const std::vector<RedisReply> replies = run_pipelined(redis, calls);
        for (std::size_t i = 0; i < replies.size() && i < capped.size(); ++i) capped[i]->side->released(replies[i]);
    } catch (const std::exception& e) {
        logger()->warn("lock client {}: giving back holds at their max_hold failed ({}); their leases end them", id,
                       e.what());
    }
}

void RedisLockClient::Impl::renew_batch(std::vector<std::shared_ptr<RedisHold>> due) {
    // The race tested by RedisMutexTest.L5_RenewalRacingUnlockNeitherRecreatesNorExtends: an unlock
    // may happen between here and the round trip. The renew script only extends a hold that is
    // still this owner's, and results for holds unlocked meanwhile are ignored.
    const SteadyTime sent = SteadyClock::now();
    std::vector<ScriptCall> calls;  // built here, not per acquisition: most holds never renew
    calls.reserve(due.size());
    for (const auto& h : due) calls.push_back(h->side->renew_call(h->owner, h->lease));
    std::vector<RedisReply> replies;
    std::string failure;
    try {
        // Tests: hold the batch, or fail it as an unreachable server would.
        fault::point("locks.watchdog.before_renew");
        replies = run_pipelined(redis, calls);
    } catch (const std::exception& e) {
        failure = e.what();
    }
    stats.renew_batches.fetch_add(1);

    std::vector<std::pair<std::shared_ptr<RedisHold>, LockLoss>> losses;
    {
        MutexLock lock(mutex);
        const SteadyTime now = SteadyClock::now();
        for (std::size_t i = 0; i < due.size(); ++i) {
            RedisHold& h = *due[i];
            if (!h.active || h.lost) continue;  // unlocked meanwhile: no report, nothing re-created
            const bool answered =
                failure.empty() && i < replies.size() && replies[i].type() == RedisReply::Type::Integer;
            if (answered && replies[i].integer() == 1) {
                h.valid_until = locks_detail::valid_until_from(sent, h.lease);
                h.next_check = std::min(sent + h.lease / 3, h.cap);
                stats.renewals.fetch_add(1);
                lock_log(spdlog::level::trace, h.side->name(), log_tag(*h.side), "renewed, lease {} ms",
                         std::chrono::duration_cast<milliseconds>(h.lease).count());
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
                    h.next_check = std::min({h.valid_until, now + retry, h.cap});
                }
            }
        }
    }
    for (const auto& [h, loss] : losses) report(h, loss);
    fault::point("locks.watchdog.after_renew");
}

}  // namespace lockstep
