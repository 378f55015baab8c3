// L7 (docs/races.md): busy polling. Waiters retry in a sleep loop: round trips wasted while the
// lock is held, and a hand-over that waits for the next poll.
//
// Forced: one waiter; the holder releases only after the waiter has polled 3 times. The polling
// lock (DEMO ONLY: the seeds' "try SET NX, sleep, try again") wastes those polls; RedisMutex makes
// one attempt, sleeps on the release message and takes the lock when it comes.
// Load: the same with 16 waiters queued on one lock, each taking it once.
#include <thread>

#include "context.h"
#include "lock_queue.h"
#include "lockstep/cache/redis_client.h"
#include "race_case.h"
#include "stats.h"

namespace lockstep::demo {

namespace {

using namespace std::chrono_literals;

constexpr const char* kScenario = "lock-pitfalls";
constexpr auto kPoll = 10ms;
constexpr int kHoldMs = 5;
constexpr int kLoadWaiters = 16;
const char* const kPolling = "polling lock, sleep 10 ms and retry (demo-only)";
const char* const kMutex = "RedisMutex (sleeps until the release message)";

// DEMO ONLY: SET key token NX PX lease; on failure sleep kPoll and try again. Released by an
// owner-checked delete (so only the waiting differs from RedisMutex).
class PollingLock final : public WaitingLock {
public:
    explicit PollingLock(const WaitingLockArgs& a)
        : redis_(a.w.services.redis()),
          key_(a.w.services.prefix() + "{" + a.name + "}:poll"),
          token_(std::to_string(wall_us()) + "-" + std::to_string(a.w.index)),
          on_sleep_(a.on_sleep) {}
    void lock() override {
        for (;;) {
            ++attempts_;
            if (redis_.command({"SET", key_, token_, "NX", "PX", "30000"}).type() != RedisReply::Type::Nil) return;
            on_sleep_();
            std::this_thread::sleep_for(kPoll);
            ++wakeups_;
        }
    }
    void unlock() override {
        ++other_;
        redis_.command({"EVAL", "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
                        "1", key_, token_});
    }
    std::uint64_t attempts() const override { return attempts_; }
    std::uint64_t wakeups() const override { return wakeups_; }
    std::uint64_t other_commands() const override { return other_; }

private:
    RedisClient& redis_;
    std::string key_, token_;
    std::function<void()> on_sleep_;
    std::uint64_t attempts_ = 0, wakeups_ = 0, other_ = 0;
};

void judge(Result& r, const QueueNumbers& n) {
    // Polling: a waiter woke, went back to Redis and found the lock still held (then slept again).
    r.observed = n.wasted_attempts_per_acquisition >= 1 ? Outcome::Reproduced : Outcome::Prevented;
    r.evidence = std::to_string(n.waiters) + " waiter" + (n.waiters == 1 ? "" : "s") + ": " +
                 fixed1(n.attempts_per_acquisition) + " acquire attempts per acquisition (" +
                 fixed1(n.wasted_attempts_per_acquisition) + " while it was held), hand-over p50 " +
                 fixed2(n.handover_p50_ms) + " ms, max " + fixed2(n.handover_max_ms) + " ms";
    r.cost = fixed1(n.commands_per_acquisition) + " Redis commands per acquisition, hand-over p50 " +
             fixed2(n.handover_p50_ms) + " ms";
    for (auto& m : n.as_trial().metrics) r.metrics.push_back(m);
}

const char* kind_of(const std::string& protection) { return protection == kPolling ? "polling" : "mutex"; }

void forced(DemoContext& ctx, const RaceCase& c) {
    for (const char* p : {kPolling, kMutex}) {
        auto base = ctx.row(c, p, Mode::Forced);
        if (!base) continue;
        // The holder waits for 3 sleeps of the waiter: a polling lock polls 3 times, RedisMutex
        // sleeps once and never comes back until woken, so for it 1.
        const int sleeps = std::string(p) == kPolling ? 3 : 1;
        record_forced(ctx, std::move(*base), [&](int) {
            QueueNumbers n = run_queue(ctx, kind_of(p), 1, sleeps, kHoldMs);
            Result scratch;
            judge(scratch, n);
            Trial t;
            t.reproduced = scratch.observed == Outcome::Reproduced;
            t.evidence = scratch.evidence;
            t.metrics = scratch.metrics;
            return t;
        });
    }
}

void load(DemoContext& ctx, const RaceCase& c) {
    for (const char* p : {kPolling, kMutex}) {
        auto r = ctx.row(c, p, Mode::Load);
        if (!r) continue;
        ctx.progress(std::string(kScenario) + ": load L7, " + p + ": " + std::to_string(kLoadWaiters) + " waiters");
        judge(*r, run_queue(ctx, kind_of(p), kLoadWaiters, 1, kHoldMs));
        ctx.add(std::move(*r));
    }
}

}  // namespace

void add_race_l7() {
    waiting_locks()["polling"] = [](const WaitingLockArgs& a) { return std::make_unique<PollingLock>(a); };
    add_race({kScenario, "L7",
              "a waiter finds the lock held; the holder releases only after the waiter has gone to sleep 3 times "
              "(a polling lock) or once (RedisMutex)",
              {"holder: takes the lock, releases once the waiter slept", "waiter: tries, sleeps its way, takes it"},
              "16 waiters queued on one lock, each taking it once for 5 ms",
              {{kPolling, Mode::Forced, Outcome::Reproduced},
               {kMutex, Mode::Forced, Outcome::Prevented},
               {kPolling, Mode::Load, Outcome::Reproduced},
               {kMutex, Mode::Load, Outcome::Prevented}},
              forced, load});
}

}  // namespace lockstep::demo
