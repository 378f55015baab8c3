// L9 (docs/races.md): the herd on wake-up. Every waiter is woken by each release and all race for
// the lock again; all but one go back to sleep.
//
// Forced: 4 waiters asleep on the lock; the holder releases; each waiter takes it once in turn.
// The herd lock (DEMO ONLY: one broadcast per release to every registered waiter) wakes every
// waiter at every release; RedisMutex wakes one. Load: the same with 16 waiters.
#include "context.h"
#include "lockstep/core/error.h"
#include "lock_queue.h"
#include "lockstep/cache/redis_client.h"
#include "race_case.h"
#include "stats.h"

namespace lockstep::demo {

namespace {

using namespace std::chrono_literals;

constexpr const char* kScenario = "lock-pitfalls";
constexpr int kHoldMs = 5;
constexpr int kForcedWaiters = 4;
constexpr int kLoadWaiters = 16;
const char* const kHerd = "herd lock, one broadcast wakes all (demo-only)";
const char* const kMutex = "RedisMutex (wakes one waiter per release)";

// DEMO ONLY: SET key token NX PX lease; a waiter that fails registers in a set and blocks on its
// own wake-up list; unlock deletes the key and wakes EVERY registered waiter.
class HerdLock final : public WaitingLock {
public:
    explicit HerdLock(const WaitingLockArgs& a)
        : w_(a.w),
          redis_(a.w.services.redis()),
          key_(a.w.services.prefix() + "{" + a.name + "}:herd"),
          waiters_(key_ + ":waiters"),
          me_(a.name + ":w" + std::to_string(a.w.index)),
          on_sleep_(a.on_sleep) {}
    void lock() override {
        for (;;) {
            ++attempts_;
            if (redis_.command({"SET", key_, me_, "NX", "PX", "30000"}).type() != RedisReply::Type::Nil) {
                ++other_;
                redis_.command({"SREM", waiters_, me_});
                return;
            }
            ++other_;
            redis_.command({"SADD", waiters_, me_});
            // A release between the failed SET and the SADD would be missed: look once more.
            ++attempts_;
            if (redis_.command({"SET", key_, me_, "NX", "PX", "30000"}).type() != RedisReply::Type::Nil) {
                ++other_;
                redis_.command({"SREM", waiters_, me_});
                return;
            }
            on_sleep_();
            if (!w_.services.signals().wait("herd:" + me_, 60s)) throw TimeoutError("herd waiter never woken");
            ++wakeups_;
        }
    }
    void unlock() override {
        ++other_;
        redis_.command({"DEL", key_});
        ++other_;
        auto members = redis_.command({"SMEMBERS", waiters_});
        for (const auto& m : members.elements()) {
            ++other_;
            w_.services.signals().post("herd:" + m.str());  // everyone: the herd
        }
    }
    std::uint64_t attempts() const override { return attempts_; }
    std::uint64_t wakeups() const override { return wakeups_; }
    std::uint64_t other_commands() const override { return other_; }

private:
    Worker& w_;
    RedisClient& redis_;
    std::string key_, waiters_, me_;
    std::function<void()> on_sleep_;
    std::uint64_t attempts_ = 0, wakeups_ = 0, other_ = 0;
};

void judge(Result& r, const QueueNumbers& n) {
    // The herd: a release woke more than the one waiter that can take the lock.
    r.observed = n.wakeups_per_release > 1.0 ? Outcome::Reproduced : Outcome::Prevented;
    r.evidence = std::to_string(n.waiters) + " waiters, " + std::to_string(static_cast<int>(n.acquisitions)) + " releases with waiters: " +
                 fixed2(n.wakeups_per_release) + " wake-ups per release, " + fixed2(n.wasted_attempts_per_acquisition) +
                 " wasted attempts per acquisition";
    r.cost = fixed1(n.commands_per_acquisition) + " Redis commands per acquisition, hand-over p50 " +
             fixed2(n.handover_p50_ms) + " ms";
    for (auto& m : n.as_trial().metrics) r.metrics.push_back(m);
}

const char* kind_of(const std::string& protection) { return protection == kHerd ? "herd" : "mutex"; }

void forced(DemoContext& ctx, const RaceCase& c) {
    for (const char* p : {kHerd, kMutex}) {
        auto base = ctx.row(c, p, Mode::Forced);
        if (!base) continue;
        record_forced(ctx, std::move(*base), [&](int) {
            Result scratch;
            judge(scratch, run_queue(ctx, kind_of(p), kForcedWaiters, 1, kHoldMs));
            return Trial{scratch.observed == Outcome::Reproduced, scratch.evidence, scratch.metrics};
        });
    }
}

void load(DemoContext& ctx, const RaceCase& c) {
    for (const char* p : {kHerd, kMutex}) {
        auto r = ctx.row(c, p, Mode::Load);
        if (!r) continue;
        ctx.progress(std::string(kScenario) + ": load L9, " + p + ": " + std::to_string(kLoadWaiters) + " waiters");
        judge(*r, run_queue(ctx, kind_of(p), kLoadWaiters, 1, kHoldMs));
        ctx.add(std::move(*r));
    }
}

}  // namespace

void add_race_l9() {
    waiting_locks()["herd"] = [](const WaitingLockArgs& a) { return std::make_unique<HerdLock>(a); };
    add_race({kScenario, "L9",
              "4 waiters asleep on a held lock; the holder releases; each waiter takes it once in turn",
              {"holder: takes the lock, releases once every waiter sleeps", "waiter 1..4: tries, sleeps, takes it"},
              "the same with 16 waiters",
              {{kHerd, Mode::Forced, Outcome::Reproduced},
               {kMutex, Mode::Forced, Outcome::Prevented},
               {kHerd, Mode::Load, Outcome::Reproduced},
               {kMutex, Mode::Load, Outcome::Prevented}},
              forced, load});
}

}  // namespace lockstep::demo
