// Loss detection under a partition (RACES L11), per backend: a holder whose lock service reaches
// the servers through fault proxies (ProxiedLockService) is blackholed while it holds; a rival
// that reaches them directly waits for the lock. Per trial, two margins before the rival acquired
// (the server let the hold go at or before that instant):
//   - lost():   the holder's own thread polls lost() every millisecond;
//   - on_lost:  the callback's call.
// A positive margin is the time the holder knew before anyone else could hold; negative would be
// two believers. Trials run side by side (each its own proxies, services and lock name), so a
// backend costs about one lease. The judged figure is the smallest margin of every trial
// (target: never negative); p50 and p99 (the margin 99% of trials reach) are shown.
//
// ZooKeeper (when built) runs on a private standalone server started here, Redlock on five
// private Redis masters: a few seconds of start-up, not measured.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "families.h"
#include "lockstep/core/uri.h"
#include "lockstep/locks/lock_service.h"
#include "lockstep/servers/local_redis_group.h"
#include "lockstep/servers/proxied_lock_service.h"
#ifdef LOCKSTEP_HAVE_ZOOKEEPER
#include "lockstep/servers/local_zookeeper.h"
#endif

namespace lockstep::bench {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kLease = 1000ms;
constexpr int kZooKeeperSessionMs = 1000;  // its holds' lease

std::string bench_name(const std::string& backend) { return "loss_detection/" + backend; }

double ms_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

struct Margins {
    double lost_ms = 0;     // rival acquired − the holder's lost() first true
    double on_lost_ms = 0;  // rival acquired − on_lost called
};

// Nearest-rank percentile of `v` (sorted here), p in [0, 100].
double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const auto rank = static_cast<std::size_t>(std::max(1.0, p / 100.0 * static_cast<double>(v.size()) + 0.999999));
    return v[std::min(rank, v.size()) - 1];
}

Margins trial(const std::string& url, const std::string& prefix) {
    LockServiceOptions so;
    so.prefix = prefix;
    ProxiedLockService holder = open_proxied_lock_service(url, so);
    auto rival_service = open_lock_service(url, so);
    std::mutex mu;
    std::optional<Clock::time_point> on_lost_at;
    LockOptions lo;
    lo.lease = kLease;
    lo.on_lost = [&](const LockLoss&) {
        std::lock_guard g(mu);
        if (!on_lost_at) on_lost_at = Clock::now();
    };
    auto held = holder.service->make_mutex("loss", lo);
    auto rival = rival_service->make_mutex("loss", LockOptions{.lease = kLease});
    std::promise<void> holding, cut, healed;
    std::optional<Clock::time_point> lost_at;
    std::thread holder_thread([&] {
        held->lock();
        holding.set_value();
        cut.get_future().wait();
        const auto give_up = Clock::now() + kLease + 20s;
        while (Clock::now() < give_up && !held->lost()) std::this_thread::sleep_for(1ms);
        if (held->lost()) lost_at = Clock::now();
        healed.get_future().wait();
        held->unlock();  // reports the loss; never throws
    });
    holding.get_future().wait();
    holder.blackhole();
    cut.set_value();
    const bool acquired = rival->try_lock_for(kLease + 20s);
    const auto rival_at = Clock::now();
    holder.pass();
    healed.set_value();
    holder_thread.join();
    if (!acquired) throw std::runtime_error("the rival never acquired");
    rival->unlock();
    if (!lost_at) throw std::runtime_error("the holder's lost() never turned true");
    Margins m;
    m.lost_ms = ms_between(*lost_at, rival_at);
    std::lock_guard g(mu);
    // The holder unlocked (and so was told of the loss) before this: no call is a failure, not a margin.
    if (!on_lost_at) throw std::runtime_error("on_lost was never called for the lost hold");
    m.on_lost_ms = ms_between(*on_lost_at, rival_at);
    return m;
}

struct Backend {
    std::string name;
    std::function<std::string()> url;  // started on first use
};

}  // namespace

void register_loss_detection(Environment& env, Plan& plan) {
    const int trials = env.budget().quick ? 5 : 20;
    std::vector<Backend> backends;
    const std::string redis_url = to_url(env.redis_options());
    const std::string mysql_url = to_url(env.mysql_options());
    backends.push_back({"redis", [=] { return redis_url; }});
    backends.push_back({"redis-fair", [=] { return "redis-fair" + redis_url.substr(5); }});
    backends.push_back({"mysql", [=] { return mysql_url; }});
#ifdef LOCKSTEP_HAVE_ZOOKEEPER
    backends.push_back({"zookeeper", [] {
                            static LocalZooKeeper zk{LocalZooKeeperOptions{}};
                            return zk.url() + "?session_timeout_ms=" + std::to_string(kZooKeeperSessionMs);
                        }});
#endif
    backends.push_back({"redlock", [] {
                            static LocalRedisGroup group{LocalRedisGroupOptions{}};
                            return group.redlock_url();
                        }});
    const std::string prefix = env.prefix() + "loss:";
    int order = row_order::kLossDetection;
    for (const Backend& backend : backends) {
        const std::string name = bench_name(backend.name);
        benchmark::RegisterBenchmark(name.c_str(),
                                     [=](benchmark::State& state) {
                                         std::vector<Margins> margins(static_cast<std::size_t>(trials));
                                         std::string error;
                                         for (auto _ : state) {
                                             const std::string url = backend.url();
                                             std::vector<std::thread> threads;
                                             std::mutex error_mu;
                                             for (int i = 0; i < trials; ++i) {
                                                 threads.emplace_back([&, i] {
                                                     try {
                                                         margins[static_cast<std::size_t>(i)] = trial(
                                                             url, prefix + backend.name + ":" + std::to_string(i) + ":");
                                                     } catch (const std::exception& e) {
                                                         std::lock_guard g(error_mu);
                                                         error = e.what();
                                                     }
                                                 });
                                             }
                                             for (auto& t : threads) t.join();
                                         }
                                         if (!error.empty()) {
                                             state.SkipWithError(error.c_str());
                                             return;
                                         }
                                         std::vector<double> lost, on_lost;
                                         for (const Margins& m : margins) {
                                             lost.push_back(m.lost_ms);
                                             on_lost.push_back(m.on_lost_ms);
                                         }
                                         state.counters["lost_min_ms"] = percentile(lost, 0);
                                         state.counters["lost_p50_ms"] = percentile(lost, 50);
                                         state.counters["lost_p99_ms"] = percentile(lost, 1);
                                         state.counters["on_lost_min_ms"] = percentile(on_lost, 0);
                                         state.counters["on_lost_p50_ms"] = percentile(on_lost, 50);
                                         state.counters["on_lost_p99_ms"] = percentile(on_lost, 1);
                                     })
            ->Iterations(1)
            ->Repetitions(1)
            ->Unit(benchmark::kMillisecond);
        plan.add(order++, backend.name + ": loss known before a rival acquires", "margin ≥ 0 ms", {name},
                 [name, trials](const Results& r) {
                     TableRow row;
                     const double min_lost = r.counter(name, "lost_min_ms");
                     const double min_on_lost = r.counter(name, "on_lost_min_ms");
                     row.ours = "lost() " + fixed(r.counter(name, "lost_p50_ms"), 1) + " ms p50, " +
                                fixed(r.counter(name, "lost_p99_ms"), 1) + " ms p99 before";
                     row.baseline = "on_lost " + fixed(r.counter(name, "on_lost_p50_ms"), 1) + " ms p50";
                     row.ratio = fixed(std::min(min_lost, min_on_lost), 1) + " ms min";
                     row.verdict = min_lost >= 0 && min_on_lost >= 0 ? Verdict::Met : Verdict::Missed;
                     row.notes = std::to_string(trials) + " trials side by side, lease " +
                                 std::to_string(kLease.count()) +
                                 " ms, the holder blackholed by fault proxies; p99: the margin 99% of trials reach "
                                 "(nearest rank); smallest for lost() / on_lost: " +
                                 fixed(min_lost, 1) + " / " + fixed(min_on_lost, 1) + " ms";
                     row.data = {{"lost_min_ms", min_lost},
                                 {"lost_p50_ms", r.counter(name, "lost_p50_ms")},
                                 {"lost_p99_ms", r.counter(name, "lost_p99_ms")},
                                 {"on_lost_min_ms", min_on_lost},
                                 {"on_lost_p50_ms", r.counter(name, "on_lost_p50_ms")},
                                 {"on_lost_p99_ms", r.counter(name, "on_lost_p99_ms")}};
                     return row;
                 });
    }
}

}  // namespace lockstep::bench
