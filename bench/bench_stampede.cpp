// Stampede (docs/races.md C6): a write invalidates one hot key, then 64 threads miss it at the same
// instant (a barrier releases them together). Counted per invalidation: database loads by the
// read path (RepositoryMetrics::loads). The target is exactly one load every time: the first
// reader claims the key with its marker, the other 63 wait for its value. Also checked: every
// reader got the version the write created and its value. That version is the one update()
// returns (the written row re-read), not the old version + 1: a version is
// max(old + 1, the database clock in µs) (docs/races.md C11), so it usually jumps.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "families.h"
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

}  // namespace

void register_stampede(Environment& env, Plan& plan) {
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
