// Stampede (docs/races.md C6): a write invalidates one hot key, then 64 threads miss it at the same
// instant (a barrier releases them together). Counted per invalidation: database loads by the
// read path (RepositoryMetrics::loads). The target is exactly one load every time: the first
// reader claims the key with its marker, the other 63 wait for its value. Also checked: every
// reader got the version the write created and its value. That version is the one update()
// returns (the written row re-read), not the old version + 1: a version is
// max(old + 1, the database clock in µs) (docs/races.md C11), so it usually jumps.
//
// Stale-while-revalidate (RepositoryOptions::max_stale, docs/cache.md): the hot key's TTL runs
// out and its one refill takes ~20 ms (the loader's database read is slowed by a fault point).
// 16 readers released together each read the key (1 ms apart) until they get the refilled value;
// every read's latency counts, the refiller's included. With max_stale the others get the stale value
// at once; with the stampede guard only, they wait for the refill. Reported: the readers' p99
// with stale-while-revalidate ÷ the same with the guard only.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "families.h"
#include "lockstep/core/fault_point.h"
#include "repositories.h"

namespace lockstep::bench {

namespace {

constexpr int kReaders = 64;

// `rounds` times: a write invalidates the key, then kReaders threads released by one barrier
// read it at once. Counts the database loads of each round.
void stampede_rounds(benchmark::State& state, ProductRepository& repo, std::int64_t id, int rounds) {
    for (auto _ : state) {
        std::barrier sync(kReaders + 1);
        // What the round's write stored: its row version and price (-1: the write failed).
        std::atomic<std::int64_t> expected{-1};
        std::atomic<std::int64_t> expected_price{-1};
        std::atomic<long long> wrong_version{0};
        std::atomic<long long> failures{0};
        std::vector<std::thread> readers;
        for (int t = 0; t < kReaders; ++t) {
            readers.emplace_back([&] {
                for (int round = 0; round < rounds; ++round) {
                    sync.arrive_and_wait();  // the write is done: go
                    try {
                        auto v = repo.get_versioned(id);
                        if (!v || v->version != expected.load() || v->value.price != expected_price.load()) {
                            ++wrong_version;
                        }
                    } catch (const std::exception&) {
                        ++failures;
                    }
                    sync.arrive_and_wait();  // round over
                }
            });
        }
        long long total = 0, most = 0, fewest = kReaders;
        const auto start = repo.metrics();
        for (int round = 0; round < rounds; ++round) {
            std::int64_t version = -1, price = -1;
            try {
                const auto stored = repo.update(id, [](Product& p) { p.price += 1; });
                if (stored) {
                    version = stored->version;
                    price = stored->price;
                }
            } catch (const std::exception&) {
                ++failures;  // the readers still run the round, so nobody waits forever
            }
            expected = version;
            expected_price = price;
            const auto loads = repo.metrics().loads;
            sync.arrive_and_wait();
            sync.arrive_and_wait();
            const long long n = static_cast<long long>(repo.metrics().loads - loads);
            total += n;
            most = std::max(most, n);
            fewest = std::min(fewest, n);
        }
        for (auto& th : readers) th.join();
        const auto end = repo.metrics();
        state.counters["rounds"] = rounds;
        state.counters["loads"] = static_cast<double>(total);
        state.counters["max_loads"] = static_cast<double>(most);
        state.counters["min_loads"] = static_cast<double>(fewest);
        state.counters["wrong_version"] = static_cast<double>(wrong_version.load());
        state.counters["failures"] = static_cast<double>(failures.load());
        state.counters["guard_waits"] = static_cast<double>(end.guard_waits - start.guard_waits);
        state.counters["guard_timeouts"] = static_cast<double>(end.guard_timeouts - start.guard_timeouts);
    }
}

constexpr int kRefillReaders = 16;
constexpr auto kRefillLoad = std::chrono::milliseconds(20);
constexpr auto kMaxStale = std::chrono::minutes(1);
// Between one reader's reads: readers that keep arriving during the refill, not 16 threads
// spinning on 2 cores (which would measure the scheduler).
constexpr auto kReadPause = std::chrono::milliseconds(1);

double quantile(std::vector<double> v, double q) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1))];
}

// `rounds` times: the cached hot key's TTL runs out (with max_stale: its remaining TTL is set
// inside the stale window; without: the key is gone, as Redis leaves it), then kRefillReaders
// threads read it until each gets the refilled (not stale) value. Records every read's latency.
void refill_rounds(benchmark::State& state, Environment& env, ProductRepository& repo, std::int64_t id, bool swr,
                   int rounds) {
    const std::string key = repo.key_of(id);
    auto slow = fault::arm(std::string(repo_points::after_db_read), fault::pause(kRefillLoad));
    for (auto _ : state) {
        std::vector<double> seconds;
        std::mutex seconds_mutex;
        std::atomic<long long> stale{0}, failures{0}, reads{0};
        for (int round = 0; round < rounds; ++round) {
            try {
                repo.get(id);  // cached (a load when the previous round left nothing)
                if (swr) {
                    env.redis().command({"PEXPIRE", key, std::to_string(std::chrono::milliseconds(kMaxStale).count() / 2)});
                } else {
                    env.redis().del({key});
                }
            } catch (const std::exception&) {
                ++failures;
                continue;
            }
            std::barrier sync(kRefillReaders);
            std::vector<std::thread> readers;
            for (int t = 0; t < kRefillReaders; ++t) {
                readers.emplace_back([&] {
                    std::vector<double> mine;
                    sync.arrive_and_wait();
                    for (int n = 0; n < 100'000; ++n) {  // bounded: a refill that never lands ends the round
                        const auto t0 = std::chrono::steady_clock::now();
                        try {
                            auto v = repo.get_versioned(id);
                            mine.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
                            if (!v || !v->stale) break;
                            ++stale;
                            std::this_thread::sleep_for(kReadPause);
                        } catch (const std::exception&) {
                            ++failures;
                            break;
                        }
                    }
                    reads += static_cast<long long>(mine.size());
                    std::lock_guard lock(seconds_mutex);
                    seconds.insert(seconds.end(), mine.begin(), mine.end());
                });
            }
            for (auto& th : readers) th.join();
        }
        state.counters["rounds"] = rounds;
        state.counters["reads"] = static_cast<double>(reads.load());
        state.counters["stale"] = static_cast<double>(stale.load());
        state.counters["failures"] = static_cast<double>(failures.load());
        state.counters["p50_s"] = quantile(seconds, 0.5);
        state.counters["p99_s"] = quantile(seconds, 0.99);
    }
}

std::shared_ptr<ProductRepository> make_refill_repository(Environment& env, std::chrono::milliseconds max_stale) {
    RepositoryOptions o;
    o.strategy = std::make_shared<WriteThenDelete>();
    o.key_prefix = env.prefix();
    o.ttl = std::chrono::hours(1);
    o.ttl_jitter = std::chrono::milliseconds(0);
    o.max_stale = max_stale;
    return std::make_shared<ProductRepository>(product_entity(), env.db(), env.redis(), std::move(o));
}

void register_stale_while_revalidate(Environment& env, Plan& plan) {
    const int rounds = env.budget().stampede_rounds;
    auto swr = make_refill_repository(env, kMaxStale);
    auto guard = make_refill_repository(env, std::chrono::milliseconds(0));
    const std::int64_t swr_id = new_products(env, 1);
    const std::int64_t guard_id = new_products(env, 1);
    Environment* e = &env;
    benchmark::RegisterBenchmark("stampede/refill_readers_swr",
                                 [e, swr, swr_id, rounds](benchmark::State& state) {
                                     refill_rounds(state, *e, *swr, swr_id, true, rounds);
                                 })
        ->Iterations(1)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond)
        ->Repetitions(1);
    benchmark::RegisterBenchmark("stampede/refill_readers_guard_only",
                                 [e, guard, guard_id, rounds](benchmark::State& state) {
                                     refill_rounds(state, *e, *guard, guard_id, false, rounds);
                                 })
        ->Iterations(1)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond)
        ->Repetitions(1);

    plan.add(row_order::kStampede + 1, "stale-while-revalidate: readers' p99 during a refill", "< 1×",
             {"stampede/refill_readers_swr", "stampede/refill_readers_guard_only"}, [](const Results& r) {
                 const std::string s = "stampede/refill_readers_swr";
                 const std::string g = "stampede/refill_readers_guard_only";
                 const double swr_p99 = r.counter(s, "p99_s");
                 const double guard_p99 = r.counter(g, "p99_s");
                 const double failures = r.counter(s, "failures") + r.counter(g, "failures");
                 const double ratio = guard_p99 > 0 ? swr_p99 / guard_p99 : 0;
                 TableRow row;
                 row.ours = "p99 " + micros(swr_p99) + " (p50 " + micros(r.counter(s, "p50_s")) + ")";
                 row.baseline = "p99 " + micros(guard_p99) + " (p50 " + micros(r.counter(g, "p50_s")) + ")";
                 row.ratio = times(ratio);
                 // Met: the readers beat the guard's wait, and did so with stale values (not by luck).
                 const bool served_stale = r.counter(s, "stale") > 0;
                 row.verdict = (failures == 0 && served_stale && guard_p99 > 0 && ratio < 1) ? Verdict::Met
                                                                                              : Verdict::Missed;
                 row.notes = fixed(r.counter(s, "rounds"), 0) + " refills of a hot key taking ~20 ms, 16 readers each " +
                             "reading (1 ms apart) until it gets the refilled value (the refiller's read included); " +
                             "max_stale 1 min: " + fixed(r.counter(s, "reads"), 0) + " reads, " +
                             fixed(r.counter(s, "stale"), 0) + " served stale; guard only: " +
                             fixed(r.counter(g, "reads"), 0) + " reads; " + fixed(failures, 0) + " errors";
                 row.data = {{"swr_p99_s", swr_p99}, {"guard_p99_s", guard_p99}, {"ratio", ratio},
                             {"swr_stale", r.counter(s, "stale")}, {"failures", failures}};
                 return row;
             });
}

}  // namespace

void register_stampede(Environment& env, Plan& plan) {
    register_stale_while_revalidate(env, plan);

    const Budget& b = env.budget();
    auto repo = make_repository(env, std::make_shared<WriteThenDelete>());
    const std::int64_t id = new_products(env, 1);
    const int rounds = b.stampede_rounds;

    benchmark::RegisterBenchmark(
        "stampede/64_concurrent_misses",
        [repo, id, rounds](benchmark::State& state) { stampede_rounds(state, *repo, id, rounds); })
        ->Iterations(1)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond)
        ->Repetitions(1);

    plan.add(row_order::kStampede, "stampede (64 concurrent misses)", "exactly 1",
             {"stampede/64_concurrent_misses"}, [](const Results& r) {
                 const std::string n = "stampede/64_concurrent_misses";
                 const double rounds = r.counter_sum(n, "rounds");
                 const double loads = r.counter_sum(n, "loads");
                 const double most = r.counter_max(n, "max_loads");
                 const double fewest = r.counter_min(n, "min_loads");
                 const double wrong = r.counter_sum(n, "wrong_version");
                 const double failures = r.counter_sum(n, "failures");
                 TableRow row;
                 row.ours = fixed(loads / rounds, 2) + " loads/invalidation (min " + fixed(fewest, 0) +
                            ", max " + fixed(most, 0) + ")";
                 row.baseline = "—";
                 row.ratio = "—";
                 const bool ok = most == 1 && fewest == 1 && wrong == 0 && failures == 0;
                 row.verdict = ok ? Verdict::Met : Verdict::Missed;
                 row.notes =
                     fixed(rounds, 0) + " invalidations × 64 readers (WriteThenDelete, stampede guard on); " +
                     fixed(r.counter_sum(n, "guard_waits"), 0) + " waited for the loader, " +
                     fixed(r.counter_sum(n, "guard_timeouts"), 0) + " gave up waiting; " + fixed(wrong, 0) +
                     " answers with another version or value, " + fixed(failures, 0) + " errors";
                 row.data = {{"rounds", rounds},    {"loads", loads},         {"max_loads", most},
                             {"min_loads", fewest}, {"wrong_version", wrong}, {"failures", failures}};
                 return row;
             });
}

}  // namespace lockstep::bench
