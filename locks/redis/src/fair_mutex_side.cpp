// The fair mutex as a LockSide of RedisLockClient: what differs from the barging mutex
// (redis_mutex.cpp's MutexSide) is here, as the side's hooks; the rest is the client's flow.
//
//   - Keys (fair_lock_scripts.cpp): the lock string "<stem>:fair", the line "<stem>:fair:q" and
//     its expiries "<stem>:fair:qx", the fencing counter shared with RedisMutex of the name; one
//     grant channel per (client, name), "<stem>:fair:ch:<client id>".
//   - Owner value (owner_value): "<client id>:<owner number>:<hold number>:<lease ms>", which is
//     also the waiter's entry in the line; the release script reads from it where to publish a
//     grant and the granted hold's lease. A hold granted by a release has the value
//     "<waiter>#<token>" (confirm_grant), its renewals and release send that.
//   - Wake rule: WakeRule::Grant. A release hands the lock to the oldest live waiter in its own
//     script and tells it "<waiter> <token>"; the waiter confirms with a renewal (L12) and holds,
//     without an acquire script. A waiter of this client is told in-process (the script returns
//     the grant instead of publishing it: deliver()).
//   - Re-entry (attempt with expect_held) is the renewal script: still ours, or lost.
//   - Give-back (a lost or late reply, L11) and a waiter's withdrawal are the leave script, which
//     frees a hold that is the waiter's (taken by its script, or granted) and hands it on.
//   - Orphan grants (a grant message for a waiter this client no longer has) are undone by the
//     watchdog (undo_grant): the leave script with the exact granted value.
//   - A waiter re-checks at least every waiter_grace / 2 (recheck_limit), which refreshes its
//     place in the line; the room lingers 2 s (a name contended again soon queues its next waiter
//     in its first script).
#include "fair_mutex_side.h"

#include <array>
#include <charconv>
#include <string_view>

#include "fair_lock_scripts.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/core/logging.h"

namespace lockstep {

namespace {

using namespace std::chrono_literals;

std::optional<FenceToken> parse_token(std::string_view s) {
    FenceToken t = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), t);
    if (ec != std::errc() || p != s.data() + s.size() || t <= 0) return std::nullopt;
    return t;
}

class FairMutexSide final : public LockSide {
public:
    FairMutexSide(RedisLockClient::Impl& impl, const LockKeys& keys, HoldSettings settings,
                  const RedisFairLockOptions& fair)
        : LockSide(std::move(settings)),
          impl_(impl),
          name_(keys.name()),
          lock_(keys.stem() + ":fair"),
          queue_(keys.stem() + ":fair:q"),
          queue_expiry_(keys.stem() + ":fair:qx"),
          fence_(keys.fence()),
          channel_prefix_(keys.stem() + ":fair:ch:"),
          channel_(channel_prefix_ + impl.id),
          lease_ms_(ms(this->settings().lease)),
          grace_ms_(ms(fair.waiter_grace)),
          fence_ttl_ms_(ms(fair.fence_counter_ttl)),
          recheck_(fair.waiter_grace / 2) {}

    const char* kind() const override { return "fair mutex"; }
    const SideFaultPoints& fault_points() const override {
        static const SideFaultPoints points{"locks.fair.attempt", "locks.fair.after_attempt", "locks.fair.before_release",
                                            "locks.fair.after_release"};
        return points;
    }
    const std::string& name() const override { return name_; }
    const std::string& hold_key() const override { return lock_; }
    const std::string& wait_channel() const override { return channel_; }
    WakeRule wake_rule() const override { return WakeRule::Grant; }

    std::string owner_value(std::string owner) const override { return owner + ":" + lease_ms_; }

    // A try (`ticket` null: never queues) or a waiter's queuing try; re-entry: the renewal.
    AttemptResult attempt(const std::string& owner, std::chrono::milliseconds lease, bool expect_held,
                          const WaitTicket* ticket) const override {
        AttemptResult out;
        if (expect_held) {
            auto r = impl_.redis.eval(fair_scripts::renew(), {lock_}, {owner, ms(lease)});
            r.throw_if_error();
            out.status = r.integer() == 1 ? AttemptStatus::Reentered : AttemptStatus::Lost;
            return out;
        }
        const std::array<std::string_view, 4> keys{lock_, queue_, queue_expiry_, fence_};
        const std::array<std::string_view, 5> args{owner, lease_ms_, grace_ms_, ticket ? "1" : "0", fence_ttl_ms_};
        auto r = impl_.redis.eval_views(fair_scripts::acquire(), keys, args);
        r.throw_if_error();
        out.status = r.elements().at(0).integer() == 1 ? AttemptStatus::Acquired : AttemptStatus::Busy;
        out.value = r.elements().at(1).integer();
        return out;
    }

    void leave(const std::string& owner, const WaitTicket&) const override {
        fault::point("locks.fair.leaving");
        run_leave(owner, "");
    }

    // A fair hold's count is this client's alone: an inner release sends nothing.
    int release(const std::string& owner, bool last) const override {
        if (!last) return 1;
        const std::array<std::string_view, 4> keys{lock_, queue_, queue_expiry_, fence_};
        const std::array<std::string_view, 4> args{owner, channel_prefix_, fence_ttl_ms_, impl_.id};
        auto r = impl_.redis.eval_views(fair_scripts::release(), keys, args);
        r.throw_if_error();
        if (r.type() == RedisReply::Type::Array) {
            deliver(std::move(r));  // the next holder is a waiter of this client
            return 2;
        }
        return r.integer() == 1 ? 2 : 0;
    }

    ScriptCall renew_call(const std::string& owner, std::chrono::milliseconds lease) const override {
        return {&fair_scripts::renew(), {lock_}, {owner, ms(lease)}};
    }
    ScriptCall release_call(const std::string& owner) const override {
        return {&fair_scripts::release(), {lock_, queue_, queue_expiry_, fence_}, {owner, channel_prefix_, fence_ttl_ms_, impl_.id}};
    }

    // The leave script frees a hold that is this waiter's, taken by its script or granted.
    void give_back(const std::string& owner) const override { run_leave(owner.substr(0, owner.find('#')), ""); }
    std::optional<std::chrono::milliseconds> recheck_limit() const override { return recheck_; }
    std::chrono::milliseconds room_linger() const override { return 2s; }

    std::optional<std::string> confirm_grant(const std::string& waiter, FenceToken token) const override {
        std::string value = waiter + "#" + std::to_string(token);
        fault::point("locks.fair.before_confirm");  // tests: a grant that arrives late
        auto r = impl_.redis.eval(fair_scripts::renew(), {lock_}, {value, lease_ms_});
        r.throw_if_error();
        if (r.integer() == 0) return std::nullopt;
        return value;
    }

    void undo_grant(const std::string& waiter, FenceToken token) const noexcept override {
        deliver(RedisReply::array({RedisReply::string(waiter), RedisReply::string(std::to_string(token))}));
    }

    void released(const RedisReply& reply) const noexcept override {
        if (reply.type() == RedisReply::Type::Array) deliver(reply);
    }

private:
    // Runs the leave script for `waiter` (exact: undo only that grant; "": any grant to it) and
    // returns its reply (a grant for this client's waiter to deliver, or 1).
    RedisReply run_leave(const std::string& waiter, const std::string& exact) const {
        const std::array<std::string_view, 4> keys{lock_, queue_, queue_expiry_, fence_};
        const std::array<std::string_view, 5> args{waiter, channel_prefix_, fence_ttl_ms_, impl_.id, exact};
        auto r = impl_.redis.eval_views(fair_scripts::leave(), keys, args);
        r.throw_if_error();
        if (exact.empty() && r.type() == RedisReply::Type::Array) {
            deliver(std::move(r));
            return RedisReply::integer(1);
        }
        return r;
    }

    // A grant a script returned instead of publishing it (the waiter is this client's): handed to
    // the waiter in-process, or undone at once if that waiter is no longer here. Never throws.
    void deliver(RedisReply r) const noexcept {
        try {
            for (int i = 0; i < 64 && r.type() == RedisReply::Type::Array; ++i) {
                const std::string waiter = r.elements().at(0).str();
                const std::string tok = r.elements().at(1).str();
                const auto token = parse_token(tok);
                if (token && impl_.grant_in_process(channel_, waiter, *token)) return;
                r = run_leave(waiter, waiter + "#" + tok);
            }
        } catch (const std::exception& e) {
            logger()->warn("fair lock '{}': handing a grant on failed ({}); its lease ends it", name_, e.what());
        }
    }

    RedisLockClient::Impl& impl_;
    const std::string name_, lock_, queue_, queue_expiry_, fence_, channel_prefix_, channel_;
    const std::string lease_ms_, grace_ms_, fence_ttl_ms_;
    const std::chrono::milliseconds recheck_;
};

}  // namespace

std::shared_ptr<const LockSide> make_fair_mutex_side(RedisLockClient::Impl& impl, const LockKeys& keys,
                                                     HoldSettings settings, const RedisFairLockOptions& fair) {
    return std::make_shared<FairMutexSide>(impl, keys, std::move(settings), fair);
}

}  // namespace lockstep
