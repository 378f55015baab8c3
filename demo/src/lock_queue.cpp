#include "lock_queue.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "context.h"
#include "lockstep/core/error.h"
#include "lockstep/locks/lock_client.h"
#include "lockstep/locks/redis_mutex.h"
#include "stats.h"
#include "thread_faults.h"

namespace lockstep::demo {

namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr auto kLease = 30000ms;  // no lease runs out during a run: hand-overs are by release only
constexpr auto kStepTimeout = 60s;

// RedisMutex on a lock client of its own, so that its stats are this waiter's alone. It sleeps
// on the release message (locks.wait.before_sleep marks each sleep) and is woken one at a time.
class MutexKind final : public WaitingLock {
public:
    explicit MutexKind(const WaitingLockArgs& a)
        : client_(a.w.services.new_lock_client()),
          mutex_(*client_, a.name, {.lease = kLease}),
          on_sleep_(std::string("locks.wait.before_sleep"), a.on_sleep, -1) {}
    void lock() override { mutex_.lock(); }
    void unlock() override { mutex_.unlock(); }
    std::uint64_t attempts() const override { return client_->stats().acquire_attempts; }
    std::uint64_t wakeups() const override { return client_->stats().wakeups; }
    // One release script per unlock.
    std::uint64_t other_commands() const override { return client_->stats().acquired; }

private:
    std::shared_ptr<RedisLockClient> client_;
    RedisMutex mutex_;
    ThreadFault on_sleep_;
};

// Worker role "lockq.actor": the holder (index 0) or a waiter.
json actor(Worker& w) {
    const auto& args = w.args;
    const std::string tag = args["tag"].get<std::string>();
    const bool holder = args["holder"].get<bool>();
    const int waiters = args["waiters"].get<int>();
    const int sleeps = args["sleeps"].get<int>();
    const auto hold = std::chrono::milliseconds(args["hold_ms"].get<int>());
    Signals& sig = w.services.signals();
    auto await = [&](const std::string& s) {
        if (!sig.wait(tag + ":" + s, kStepTimeout)) throw TimeoutError("waited in vain for '" + s + "'");
    };
    int slept = 0;
    WaitingLockArgs la{w, args["name"].get<std::string>(), [&] {
                           // Only the first `sleeps` sleeps count towards the holder's release.
                           if (++slept <= sleeps) sig.post(tag + ":asleep");
                       }};
    auto it = waiting_locks().find(args["kind"].get<std::string>());
    if (it == waiting_locks().end()) throw ConfigError("kind", "unknown waiting lock " + args["kind"].get<std::string>());
    auto lock = it->second(la);
    json out = json::object();
    if (holder) {
        lock->lock();
        sig.post(tag + ":held", waiters);
        for (int i = 0; i < waiters * sleeps; ++i) await("asleep");  // every waiter asleep, `sleeps` times
        out["release_us"] = wall_us();
        lock->unlock();
    } else {
        await("held");
        lock->lock();
        out["acquire_us"] = wall_us();
        std::this_thread::sleep_for(hold);
        out["release_us"] = wall_us();
        lock->unlock();
    }
    out["sleeps"] = slept;
    out["attempts"] = lock->attempts();
    out["wakeups"] = lock->wakeups();
    out["other_commands"] = lock->other_commands();
    return out;
}

}  // namespace

std::map<std::string, WaitingLockFactory>& waiting_locks() {
    static std::map<std::string, WaitingLockFactory> m = {
        {"mutex", [](const WaitingLockArgs& a) { return std::make_unique<MutexKind>(a); }}};
    static const bool role = [] {
        roles()["lockq.actor"] = actor;
        return true;
    }();
    (void)role;
    return m;
}

Trial QueueNumbers::as_trial() const {
    Trial t;
    t.metrics = {{"waiters", waiters},
                 {"acquisitions", acquisitions},
                 {"attempts_per_acquisition", attempts_per_acquisition},
                 {"wasted_attempts_per_acquisition", wasted_attempts_per_acquisition},
                 {"wakeups_per_release", wakeups_per_release},
                 {"redis_commands_per_acquisition", commands_per_acquisition},
                 {"handover_p50_ms", handover_p50_ms},
                 {"handover_max_ms", handover_max_ms}};
    return t;
}

QueueNumbers run_queue(DemoContext& ctx, const std::string& kind, int waiters, int sleeps_before_release, int hold_ms) {
    waiting_locks();  // registers the role
    const std::string name = "queue-" + std::to_string(ctx.new_ids());
    json base = {{"tag", ctx.unique("lockq")}, {"name", name},   {"kind", kind},       {"waiters", waiters},
                 {"sleeps", sleeps_before_release}, {"hold_ms", hold_ms}, {"holder", false}};
    std::vector<WorkerSpec> specs;
    json h = base;
    h["holder"] = true;
    specs.push_back({"lockq.actor", h});
    for (int i = 0; i < waiters; ++i) specs.push_back({"lockq.actor", base});
    auto results = run_workers(ctx, specs);

    QueueNumbers n;
    n.waiters = waiters;
    double attempts = 0, wakeups = 0, other = 0, sleeps = 0;
    std::vector<std::pair<std::int64_t, std::int64_t>> holds;  // acquire, release (waiters)
    for (std::size_t i = 0; i < results.size(); ++i) {
        const auto& r = results[i];
        if (i > 0) {
            attempts += r["attempts"].get<double>();
            sleeps += r["sleeps"].get<double>();
            wakeups += r["wakeups"].get<double>();
            other += r["other_commands"].get<double>();
            holds.emplace_back(r["acquire_us"].get<std::int64_t>(), r["release_us"].get<std::int64_t>());
        }
    }
    std::sort(holds.begin(), holds.end());
    Samples handover;
    std::int64_t last_release = results[0]["release_us"].get<std::int64_t>();
    for (const auto& [acq, rel] : holds) {
        handover.add(static_cast<double>(acq - last_release) / 1000);
        last_release = rel;
    }
    n.acquisitions = waiters;
    n.attempts_per_acquisition = attempts / waiters;
    // Each waiter must sleep once (the lock is held when it arrives); every further sleep followed
    // an attempt that woke, went to Redis and found the lock still held: wasted.
    n.wasted_attempts_per_acquisition = std::max(0.0, (sleeps - waiters) / waiters);
    n.wakeups_per_release = wakeups / waiters;
    n.commands_per_acquisition = (attempts + other) / waiters;
    n.handover_p50_ms = handover.percentile(50);
    n.handover_max_ms = handover.max();
    return n;
}

}  // namespace lockstep::demo
