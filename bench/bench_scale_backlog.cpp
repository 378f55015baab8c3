// The scale family's follower curve (lockstep-bench --scale): the binlog follower catching up a
// backlog of 10k, 100k and 1M changed rows, as a service's follower does after an hour down.
//
// Per size: a table of the products' shape, bound in the follower's map; a follower started and
// stopped once to save the position before the backlog; the backlog written by a plain
// connection as INSERT … SELECT of 10,000 rows per statement (MariaDB's sequence engine); then the
// follower started again from its saved position and timed from its dump connection open to
// caught up (every row decoded, its key's DEL landed). Its memory: the bench process's resident
// set sampled every 5 ms during the catch-up, its peak above the resident set before the start
// (the follower is the only thing working then); and the CPU per row of this process (the
// follower), of redis-server and of mariadbd (its dump thread) during the catch-up, so that a
// rate that falls says which of them grew. Rates at each size against the 10k backlog's, each
// repetition's own ratio: flat within 1.2× is the target.
//
// Only on the bench's private servers: a 1M-row table is not the bench's to add to yours.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "families.h"
#include "follower_options.h"
#include "lockstep/core/error.h"
#include "lockstep/db/pooled_mysql_connection.h"
#include "lockstep/invalidation/binlog_invalidator.h"

namespace lockstep::bench {

namespace {

constexpr const char* kBench = "scale/follower_backlog";
constexpr std::array<int, 3> kBacklogs = {10'000, 100'000, 1'000'000};
constexpr int kRowsPerStatement = 10'000;
using Clock = std::chrono::steady_clock;

long long resident_bytes() {
    std::ifstream statm("/proc/self/statm");
    long long pages = 0, resident = 0;
    statm >> pages >> resident;
    return resident * ::sysconf(_SC_PAGESIZE);
}

// CPU seconds (user + system) of a process by pid, 0 if unknown.
double pid_cpu_seconds(int pid) {
    return pid > 0 ? stat_file_cpu_seconds("/proc/" + std::to_string(pid) + "/stat") : 0;
}

struct CatchUp {
    double commits_per_s = 0;
    double rows_per_s = 0;
    double resident_growth = 0;  // bytes
    double delete_pipelines = 0;
    double follower_cpu_us_per_row = 0;  // this process
    double redis_cpu_us_per_row = 0;
    double mariadb_cpu_us_per_row = 0;
};

class Backlog {
public:
    Backlog(Environment& env, std::uint32_t server_id)
        : env_(env),
          table_("bench_backlog_" + std::to_string(::getpid())),
          prefix_(env.prefix() + "bkl"),
          server_id_(server_id) {}
    ~Backlog() {
        try {
            env_.db().acquire()->execute("DROP TABLE IF EXISTS " + table_);
        } catch (const std::exception&) {
            // Best effort: the private server goes with the bench.
        }
    }

    CatchUp run(int rows) {
        auto conn = env_.db().acquire();
        conn->execute("CREATE TABLE IF NOT EXISTS " + table_ +
                      " (id BIGINT PRIMARY KEY, name VARCHAR(64) NOT NULL, price BIGINT NOT NULL, "
                      "stock INT NOT NULL, version BIGINT NOT NULL)");
        conn->execute("TRUNCATE TABLE " + table_);
        const std::string name = "bench-backlog-" + prefix_ + "-" + std::to_string(rows);
        {
            auto f = follower(name);  // saves the position before the backlog
            f->start();
            if (!f->wait_caught_up(std::chrono::seconds(20))) throw Error("scale backlog: the follower did not start");
            f->stop();
        }
        const auto c0 = Clock::now();
        for (int at = 0; at < rows; at += kRowsPerStatement) {
            const int n = std::min(kRowsPerStatement, rows - at);
            conn->execute("INSERT INTO " + table_ + " (id, name, price, stock, version) SELECT seq + " +
                          std::to_string(at) + ", CONCAT('bench item ', seq), 1999, 1000, 1 FROM seq_1_to_" +
                          std::to_string(n));
        }
        CatchUp out;
        out.commits_per_s = rows / std::chrono::duration<double>(Clock::now() - c0).count();

        const long long resident_before = resident_bytes();
        std::atomic<long long> peak{resident_before};
        std::atomic<bool> sampling{true};
        std::thread sampler([&] {
            while (sampling.load()) {
                peak = std::max(peak.load(), resident_bytes());
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
            }
        });
        const double self0 = process_cpu_seconds(), redis0 = env_.redis_cpu_seconds(),
                     db0 = pid_cpu_seconds(env_.mysql_pid());
        auto f = follower(name);
        f->start();
        const auto connect_deadline = Clock::now() + std::chrono::seconds(20);
        while (!f->metrics().connected && Clock::now() < connect_deadline)
            std::this_thread::sleep_for(std::chrono::microseconds(100));
        const auto f0 = Clock::now();
        const bool caught_up = f->wait_caught_up(std::chrono::seconds(600));
        const double follow_s = std::chrono::duration<double>(Clock::now() - f0).count();
        const double self1 = process_cpu_seconds(), redis1 = env_.redis_cpu_seconds(),
                     db1 = pid_cpu_seconds(env_.mysql_pid());
        sampling = false;
        sampler.join();
        const InvalidatorMetrics m = f->metrics();
        f->stop();
        if (!caught_up) throw Error("scale backlog: the follower did not catch up with " + std::to_string(rows) + " rows");
        if (m.rows < static_cast<std::uint64_t>(rows))
            throw Error("scale backlog: the follower applied " + std::to_string(m.rows) + " of " + std::to_string(rows) +
                        " rows");
        out.rows_per_s = rows / follow_s;
        out.resident_growth = static_cast<double>(peak.load() - resident_before);
        out.delete_pipelines = static_cast<double>(m.delete_pipelines);
        out.follower_cpu_us_per_row = (self1 - self0) * 1e6 / rows;
        out.redis_cpu_us_per_row = (redis1 - redis0) * 1e6 / rows;
        out.mariadb_cpu_us_per_row = (db1 - db0) * 1e6 / rows;
        conn->execute("TRUNCATE TABLE " + table_);
        return out;
    }

private:
    std::unique_ptr<BinlogInvalidator> follower(const std::string& name) {
        return std::make_unique<BinlogInvalidator>(
            env_.mysql_options(), env_.redis(),
            InvalidationMap({{.table = table_, .entity = "product", .prefix = prefix_}}),
            bench_follower_options(name, server_id_));
    }

    Environment& env_;
    const std::string table_;
    const std::string prefix_;
    const std::uint32_t server_id_;
};

std::string at_size(const char* what, int n) {
    return std::string(what) + "@" + std::to_string(n);
}

// The median over repetitions of each repetition's own rate ratio (size n ÷ size n0).
double median_ratio(const Results& r, const std::string& counter, int n, int n0) {
    std::vector<double> v;
    for (int i = 0; i < r.repetitions(kBench); ++i) {
        const double b = r.counter_at(kBench, at_size(counter.c_str(), n0), i);
        if (b > 0) v.push_back(r.counter_at(kBench, at_size(counter.c_str(), n), i) / b);
    }
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size();
    return m % 2 == 1 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2;
}

std::string rows_label(int n) {
    return n >= 1'000'000 ? std::to_string(n / 1'000'000) + "M" : std::to_string(n / 1000) + "k";
}

}  // namespace

void register_scale_follower_backlog(Environment& env, Plan& plan) {
    Environment* e = &env;
    const bool quick = env.budget().quick;
    const std::uint32_t server_id = 8000 + static_cast<std::uint32_t>(::getpid() % 1000) * 2;
    benchmark::RegisterBenchmark(kBench, [e, quick, server_id](benchmark::State& state) {
        if (!e->private_servers()) {
            state.SkipWithError("only on the bench's private mariadbd (a 1M-row table would be added to yours)");
            return;
        }
        Backlog backlog(*e, server_id);
        for (auto _ : state) {
            for (int n : kBacklogs) {
                if (quick && n > 100'000) continue;
                const CatchUp c = backlog.run(n);
                state.counters[at_size("rows_per_s", n)] = c.rows_per_s;
                state.counters[at_size("commits_per_s", n)] = c.commits_per_s;
                state.counters[at_size("resident_growth", n)] = c.resident_growth;
                state.counters[at_size("delete_pipelines", n)] = c.delete_pipelines;
                state.counters[at_size("follower_cpu_us_per_row", n)] = c.follower_cpu_us_per_row;
                state.counters[at_size("redis_cpu_us_per_row", n)] = c.redis_cpu_us_per_row;
                state.counters[at_size("mariadb_cpu_us_per_row", n)] = c.mariadb_cpu_us_per_row;
            }
        }
    })
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1)
        ->Repetitions(quick ? 1 : 3);

    const int n0 = kBacklogs[0];
    for (std::size_t i = 1; i < kBacklogs.size(); ++i) {
        const int n = kBacklogs[i];
        if (quick && n > 100'000) continue;
        plan.add(row_order::kScale, "scale: follower catch-up, " + rows_label(n) + " rows", "≥ 0.83×", {kBench},
                 [n, n0](const Results& r) {
                     const double rate = r.counter(kBench, at_size("rows_per_s", n));
                     const double rate0 = r.counter(kBench, at_size("rows_per_s", n0));
                     const double mem = r.counter(kBench, at_size("resident_growth", n));
                     const double mem0 = r.counter(kBench, at_size("resident_growth", n0));
                     TableRow row;
                     row.target = "≥ 0.83×";
                     row.ours = per_second(rate, "rows") + " over " + rows_label(n);
                     row.baseline = per_second(rate0, "rows") + " over " + rows_label(n0);
                     const double ratio = median_ratio(r, "rows_per_s", n, n0);
                     if (ratio <= 0) {
                         row.ratio = "—";
                         row.verdict = Verdict::Shown;
                     } else {
                         row.ratio = times(ratio);
                         row.verdict = ratio >= 1 / 1.2 ? Verdict::Met : Verdict::Missed;
                     }
                     const auto cpu = [&](const char* who) {
                         return fixed(r.counter(kBench, at_size(who, n)), 2) + " (" +
                                fixed(r.counter(kBench, at_size(who, n0)), 2) + ")";
                     };
                     row.notes = "decoded + invalidated, dump connection open -> caught up; written at " +
                                 per_second(r.counter(kBench, at_size("commits_per_s", n)), "rows") +
                                 " (INSERT … SELECT, 10k rows per statement); resident set during the catch-up +" +
                                 fixed(mem / 1048576.0, 1) + " MiB (+" + fixed(mem0 / 1048576.0, 1) + " MiB over " +
                                 rows_label(n0) + "); " +
                                 fixed(r.counter(kBench, at_size("delete_pipelines", n)), 0) +
                                 " DEL pipelines; CPU µs per row at " + rows_label(n) + " (at " + rows_label(n0) +
                                 "): follower " + cpu("follower_cpu_us_per_row") + ", redis-server " +
                                 cpu("redis_cpu_us_per_row") + ", mariadbd " + cpu("mariadb_cpu_us_per_row");
                     row.data = {{"rows_per_second", rate}, {"rows_per_second_smallest", rate0},
                                 {"resident_growth_bytes", mem}, {"resident_growth_bytes_smallest", mem0},
                                 {"rows", n}, {"ratio", ratio}};
                     return row;
                 });
    }
}

}  // namespace lockstep::bench
