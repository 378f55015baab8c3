// L12 (docs/races.md): the fair Redis lock hands the lock to its head waiter by a message, while
// the server's lease for that grant runs from the release. The waiter's network is slow (its
// fault proxies add latency longer than the lease), so the grant's lease runs out on the server
// while the message is still on its way, and a thief that reaches the server directly takes the
// lock. The interleaving is forced: the waiter is held at `locks.fair.before_confirm` (the grant
// has arrived) until the thief holds.
//   - counted from its arrival (demo-only): a waiter that starts its lease when the grant arrives
//     believes it holds from then for a lease. The message left the server no earlier than the
//     release began and spent at least the proxy's latency in flight, so that belief covers at
//     least [release + latency, release + latency + lease); the thief acquired inside it:
//     reproduced.
//   - the library: the waiter confirms the grant with a renewal of its own before lock() returns;
//     the renewal finds the lock the thief's, and the waiter queues again. It returns only after
//     the thief released, with a greater fencing token: prevented.
// Both rows judge the same trials (the demo-only belief changes nothing the waiter does). The
// trials run one after another: the fault point is armed for one waiter thread at a time.
#include <atomic>
#include <chrono>
#include <future>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "context.h"
#include "lock_backends.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/locks/redis_fair_lock_service.h"
#include "lockstep/servers/proxied_lock_service.h"
#include "race_case.h"
#include "stats.h"

namespace lockstep::demo {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr const char* kScenario = "network";
constexpr const char* kBackend = "redis-fair";
constexpr auto kLease = 300ms;
constexpr auto kLatency = 400ms;  // longer than the lease: the grant's lease ends in flight
constexpr auto kThiefHolds = 200ms;
const char* const kFromArrival = "redis-fair, lease counted from the grant's arrival (demo-only)";
const char* const kConfirmed = "redis-fair, grant confirmed by a renewal before lock() returns";

double ms_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

struct TrialResult {
    // The thief acquired while a waiter counting from the grant's arrival believed it held.
    bool arrival_belief_overlapped = false;
    double thief_after_release_ms = 0;
    // The library's waiter: lock() returned while the thief held.
    bool waiter_returned_beside_thief = false;
    bool waiter_token_greater = false;
};

TrialResult trial(DemoContext& ctx) {
    Services& services = ctx.services();
    const std::string url = demo_lock_url(services, kBackend);
    LockServiceOptions so;
    so.prefix = services.prefix() + ctx.unique("l12") + ":";
    auto holder_service = open_lock_service(url, so);
    auto thief_service = open_lock_service(url, so);
    // The waiter's timeouts outlast the latency: it is slow, not cut off.
    ProxiedLockService waiter = open_proxied_lock_service(url, so, ProxiedTimeouts{.redis_timeout = 5s});
    LockOptions lease;
    lease.lease = kLease;
    // The holder's own lease is long: the waiter re-checks the lock by script when the holder's
    // lease would end, and that check must not come before the grant does.
    auto a = holder_service->make_mutex("l12", LockOptions{.lease = 10s});
    auto c = thief_service->make_mutex("l12", LockOptions{.lease = 10s});
    a->lock();

    fault::Gate in_flight(20s);
    std::promise<void> armed_for_waiter;
    std::atomic<bool> thief_holds{false};
    std::atomic<bool> returned_beside_thief{false};
    std::atomic<bool> waiter_acquired{false};
    std::atomic<std::int64_t> waiter_token{0};
    std::optional<fault::Arming> arming;
    std::thread w([&] {
        armed_for_waiter.get_future().wait();
        auto m = waiter.service->make_mutex("l12", lease);
        if (!m->try_lock_for(20s)) return;
        if (thief_holds.load()) returned_beside_thief = true;
        waiter_token = static_cast<std::int64_t>(m->fence_token());
        waiter_acquired = true;
        m->unlock();
    });
    arming.emplace(fault::arm("locks.fair.before_confirm", in_flight.action(), {0, 1, w.get_id()}));
    armed_for_waiter.set_value();
    auto fail = [&](const std::string& what) {
        in_flight.open();
        waiter.pass();
        if (thief_holds.exchange(false)) c->unlock();
        w.join();
        throw std::runtime_error(std::string(kBackend) + ": " + what);
    };
    // The slow network starts once the waiter is in line (its queue entry exists).
    auto* fair = dynamic_cast<RedisFairLockService*>(holder_service.get());
    if (fair == nullptr) fail("the redis-fair URL did not open a RedisFairLockService");
    const auto queued_by = Clock::now() + 10s;
    while (fair->queue_length("l12") < 1) {
        if (Clock::now() > queued_by) fail("the waiter never joined the line");
        std::this_thread::sleep_for(1ms);
    }
    waiter.latency(kLatency);
    const auto release_began = Clock::now();
    a->unlock();  // grants the lock to the waiter; its lease runs on the server from now
    if (!in_flight.wait_arrivals(1, 10s)) fail("the grant never reached the waiter");
    // The grant arrived; its lease ran out on the server while it was in flight.
    bool got = false;
    const auto steal_by = Clock::now() + 5s;
    while (!(got = c->try_lock()) && Clock::now() < steal_by) std::this_thread::sleep_for(2ms);
    const auto thief_at = Clock::now();
    if (!got) fail("the thief never acquired: the expired grant still held the lock on the server");
    thief_holds = true;
    const std::int64_t thief_token = static_cast<std::int64_t>(c->fence_token());
    waiter.pass();
    in_flight.open();  // the grant goes on to its confirmation now
    std::this_thread::sleep_for(kThiefHolds);
    thief_holds = false;
    c->unlock();
    w.join();
    if (!waiter_acquired.load()) throw std::runtime_error(std::string(kBackend) + ": the waiter never acquired");

    TrialResult r;
    r.thief_after_release_ms = ms_between(release_began, thief_at);
    r.arrival_belief_overlapped = thief_at < release_began + kLatency + kLease;
    r.waiter_returned_beside_thief = returned_beside_thief.load();
    r.waiter_token_greater = waiter_token.load() > thief_token;
    return r;
}

void forced(DemoContext& ctx, const RaceCase& c) {
    auto from_arrival = ctx.row(c, kFromArrival, Mode::Forced);
    auto confirmed = ctx.row(c, kConfirmed, Mode::Forced);
    if (!from_arrival && !confirmed) return;
    ctx.progress(std::string(kScenario) + ": L12, " + kBackend);
    const int n = ctx.options().repeat;
    int overlapped = 0, beside = 0, greater = 0;
    Samples thief_ms;
    std::string error;
    try {
        for (int i = 0; i < n; ++i) {
            const TrialResult t = trial(ctx);
            overlapped += t.arrival_belief_overlapped;
            beside += t.waiter_returned_beside_thief;
            greater += t.waiter_token_greater;
            thief_ms.add(t.thief_after_release_ms);
        }
    } catch (const std::exception& e) {
        error = e.what();
    }
    const std::string runs = std::to_string(n);
    if (from_arrival) {
        from_arrival->observed = overlapped > 0 ? Outcome::Reproduced : Outcome::Prevented;
        from_arrival->evidence = std::to_string(overlapped) + " of " + runs + " runs: the thief acquired " +
                                 fixed1(thief_ms.percentile(50)) + " ms after the release (p50), inside the " +
                                 std::to_string(kLatency.count() + kLease.count()) +
                                 " ms a waiter counting from the grant's arrival believes it holds";
        from_arrival->metric("runs", n).metric("reproduced_runs", overlapped);
        from_arrival->metric("thief_after_release_ms", thief_ms.percentile(50));
        from_arrival->error = error;
        ctx.add(std::move(*from_arrival));
    }
    if (confirmed) {
        confirmed->observed = beside > 0 ? Outcome::Reproduced : Outcome::Prevented;
        confirmed->evidence = std::to_string(n - beside) + " of " + runs +
                              " runs: the confirming renewal found the lock the thief's and the waiter queued again; "
                              "its lock() returned after the thief released, with a greater token in " +
                              std::to_string(greater) + " of " + runs;
        confirmed->cost = "one renewal round trip per hand-over by grant";
        confirmed->metric("runs", n).metric("reproduced_runs", beside).metric("greater_tokens", greater);
        confirmed->error = error;
        if (error.empty() && greater != n) confirmed->error = "a waiter's token was not above the thief's";
        ctx.add(std::move(*confirmed));
    }
}

}  // namespace

void add_race_l12() {
    RaceCase c{kScenario,
               "L12",
               "the fair lock's grant to its head waiter spends longer in flight than its lease; a thief reaching the "
               "server directly takes the lock before the waiter confirms",
               {"holder: holds, then releases: the release grants the lock to the waiter by a message",
                "waiter: queued behind the holder, its network slowed past the lease; held once the grant arrived",
                "thief: takes the lock directly once the grant's lease ran out on the server, holds it 200 ms"},
               "",
               {{kFromArrival, Mode::Forced, Outcome::Reproduced}, {kConfirmed, Mode::Forced, Outcome::Prevented}},
               forced,
               {}};
    add_race(std::move(c));
}

}  // namespace lockstep::demo
