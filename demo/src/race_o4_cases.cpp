// O4's other cases (docs/races.md), each forced, per lock backend (redis, mysql, zookeeper when
// built). Every case uses a slot that starts as the trial starts (the schedule's offset is the
// server's clock modulo the period), so no trial waits for a slot boundary, and every trial of
// every row runs at once: the rows cost the longest trial (a lease after a SIGKILL or SIGSTOP).
// The job's effect is a row of demo_o4_effects written in the run record's transaction; a case
// is prevented when its slot's effect committed exactly once.
//   overrun   the job overruns at_most_for: its stop_token is requested, a second node runs the
//             slot, the overrunning job's late commit is refused by the run record;
//   SIGKILL   the holder (a process of its own) is SIGKILLed mid-job, its run uncommitted: the
//             next node runs the slot once the backend lets the lock go (the lease; at once with
//             MySQL, whose server ends the killed client's session); the delay is measured;
//   skew      node A's clock runs 5 s ahead, node B's 5 s behind. Demo-only "node clock slot":
//             each node computes the slot from its own clock and locks that slot: they lock two
//             different slots and both run. JobLock reads the slot from the server's clock:
//             one run;
//   SIGSTOP   the holder is SIGSTOPped past its lease: the next node runs and commits the slot;
//             the holder, SIGCONTed, commits late and is refused by the run record's fence check.
// The SIGKILL and SIGSTOP trials are in race_o4_holder.cpp, with the holder process.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "context.h"
#include "forced.h"
#include "lock_backends.h"
#include "lockstep/coordination/job_lock.h"
#include "lockstep/coordination/job_run_record.h"
#include "lockstep/core/error.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/db/transaction.h"
#include "race_case.h"
#include "race_o4.h"
#include "stats.h"

namespace lockstep::demo {

// What a trial of O4's cases shares (race_o4.h).
O4Trial::O4Trial(DemoContext& ctx, const std::string& b)
    : backend(b), url(demo_lock_url(ctx.services(), b, kO4ZooKeeperSessionMs)),
      prefix(ctx.services().prefix() + ctx.unique("o4x") + ":"), job(ctx.services().prefix() + ctx.unique("o4-job")),
      mysql_url(ctx.services().endpoints().mysql_url), db(ctx.services().db()) {}

std::unique_ptr<LockService> O4Trial::open() const {
    LockServiceOptions so;
    so.prefix = prefix;
    return open_lock_service(url, so);
}

std::int64_t O4Trial::effects() const {
    const auto row = db.query_one("SELECT COUNT(*) AS n FROM demo_o4_effects WHERE job = ?", {job});
    return row ? row->get<std::int64_t>("n") : 0;
}

std::pair<JobSchedule, std::int64_t> starting_now(LockService& s, std::chrono::milliseconds period) {
    const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(s.server_time().time_since_epoch()).count();
    const std::int64_t offset = (now - 10) % period.count();
    return {JobSchedule::every(period, std::chrono::milliseconds(offset)), offset};
}

void commit_run(MysqlPool& db, JobContext& run) {
    Transaction tx(db);
    run.record_run(tx);
    record_effect(tx, run);
    tx.commit();
}

namespace {

using namespace std::chrono_literals;

using Clock = std::chrono::steady_clock;

constexpr auto kSkew = 5s;
constexpr std::size_t kConcurrentTrials = 15;  // one per row: --repeat runs more in waves

enum Case { kOverrun, kKilled, kNodeClock, kServerClock, kStopped, kCases };
const char* const kLabels[kCases] = {
    "JobLock at_most_for 400 ms, the job overruns, + run record",
    "holder SIGKILLed mid-job, JobLock + run record",
    "slot from the node's clock, clocks +5 s / -5 s (demo-only)",
    "JobLock (slot from the server's clock), clocks +5 s / -5 s",
    "holder SIGSTOPped past its lease, JobLock + run record",
};
const Outcome kExpected[kCases] = {Outcome::Prevented, Outcome::Prevented, Outcome::Reproduced, Outcome::Prevented,
                                   Outcome::Prevented};

std::vector<std::string> backends() {
    std::vector<std::string> v;
    for (const auto& b : demo_lock_backends(false)) {
        if (b != "redis-fair") v.push_back(b);
    }
    return v;
}

std::string label(const std::string& backend, int c) { return std::string(kLabels[c]) + " over " + backend; }

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }


Trial overrun(const O4Trial& s) {
    auto a = s.open();
    auto b = s.open();
    const auto [schedule, offset] = starting_now(*a, 2000ms);
    JobLockOptions o;
    o.boundary_wait = 100ms;
    o.at_least_for = 200ms;
    o.at_most_for = 400ms;
    o.run_record = &s.db;
    JobLock la(*a, s.job, schedule, o);
    JobLock lb(*b, s.job, schedule, o);
    std::promise<void> a_stopped, b_done;
    auto b_done_f = b_done.get_future().share();
    bool stop_seen = false, a_refused = false;
    double stopped_after = 0;
    JobRun ra;
    std::thread na([&] {
        ra = la.run_once([&](JobContext& run) {
            const auto started = Clock::now();
            {
                std::mutex m;
                std::unique_lock l(m);
                std::condition_variable_any cv;
                cv.wait_for(l, run.stop_token(), 5s, [] { return false; });  // until the cap asks it to stop
                stop_seen = run.stop_requested();
            }
            stopped_after = ms_since(started);
            a_stopped.set_value();
            b_done_f.wait_for(5s);  // it keeps running past its cap, then commits late
            try {
                commit_run(s.db, run);
            } catch (const ConflictError&) {
                a_refused = true;
            }
        });
    });
    a_stopped.get_future().wait_for(6s);
    JobRun rb;
    try {
        rb = lb.run_once([&](JobContext& run) { commit_run(s.db, run); });
    } catch (...) {
        b_done.set_value();
        na.join();
        throw;
    }
    b_done.set_value();
    na.join();
    if (ra.outcome != JobOutcome::Overran) throw std::runtime_error("the capped run ended " + std::string(to_string(ra.outcome)));
    if (rb.outcome != JobOutcome::Ran) throw std::runtime_error("the second node did not run the slot: " + rb.skip_reason);
    const auto effects = s.effects();
    Trial t;
    t.reproduced = effects > 1;
    t.evidence = std::string("A overran: stop_token ") + (stop_seen ? "requested" : "NOT requested") + " after " +
                 fixed1(stopped_after) + " ms; B ran slot " + std::to_string(rb.slot.index) + " (token " +
                 std::to_string(rb.token) + " > " + std::to_string(ra.token) + "); A's late commit " +
                 (a_refused ? "refused" : "APPLIED") + "; the slot's effect committed " + std::to_string(effects) + "x";
    t.metrics = {{"stopped_after_ms", stopped_after}, {"effects", static_cast<double>(effects)}};
    if (!stop_seen) throw std::runtime_error("the overrunning job's stop_token was never requested");
    return t;
}

Trial skewed(const O4Trial& s, bool node_clock) {
    auto a = s.open();
    auto b = s.open();
    const auto [schedule, offset] = starting_now(*a, 2000ms);
    const std::function<std::chrono::system_clock::time_point()> clocks[2] = {
        [] { return std::chrono::system_clock::now() + kSkew; }, [] { return std::chrono::system_clock::now() - kSkew; }};
    LockService* services[2] = {a.get(), b.get()};
    std::atomic<int> runs{0};
    std::int64_t slots[2] = {0, 0};
    if (node_clock) {
        // Each node: the slot from its own clock, a lock per slot, kept until the slot's end.
        std::vector<std::unique_ptr<DistributedMutex>> held;
        for (int n = 0; n < 2; ++n) {
            const JobSlot slot = schedule.slot_at(clocks[n]());
            slots[n] = slot.index;
            auto m = services[n]->make_mutex("job:" + s.job + ":" + std::to_string(slot.index));
            if (m->try_lock()) {
                runs.fetch_add(1);
                held.push_back(std::move(m));
            }
        }
        for (auto& m : held) m->unlock();
    } else {
        JobLockOptions o;
        o.boundary_wait = 100ms;
        o.run_record = &s.db;
        std::vector<std::unique_ptr<JobLock>> nodes;
        std::int64_t offsets[2] = {0, 0};
        for (int n = 0; n < 2; ++n) {
            o.local_clock = clocks[n];
            nodes.push_back(std::make_unique<JobLock>(*services[n], s.job, schedule, o));
            const JobRun r = nodes.back()->run_once([&](JobContext& run) {
                runs.fetch_add(1);
                commit_run(s.db, run);
            });
            slots[n] = r.slot.index;
            offsets[n] = r.local_clock_offset.count();
        }
        Trial t;
        t.reproduced = runs.load() > 1;
        t.evidence = "both nodes read slot " + std::to_string(slots[0]) + (slots[0] == slots[1] ? "" : " / " + std::to_string(slots[1])) +
                     " from the server (their clocks " + std::to_string(offsets[0]) + " / " + std::to_string(offsets[1]) +
                     " ms off it); the slot ran " + std::to_string(runs.load()) + "x";
        t.metrics = {{"slot_runs", runs.load()}, {"node_a_offset_ms", static_cast<double>(offsets[0])},
                     {"node_b_offset_ms", static_cast<double>(offsets[1])}};
        return t;
    }
    Trial t;
    t.reproduced = runs.load() > 1;
    t.evidence = "node A (+5 s) locked slot " + std::to_string(slots[0]) + ", node B (-5 s) slot " + std::to_string(slots[1]) +
                 " (2 s slots), at the same moment: the slot ran " + std::to_string(runs.load()) + "x";
    t.metrics = {{"slot_runs", runs.load()}};
    return t;
}

Trial trial(DemoContext& ctx, const std::string& backend, int c) {
    const O4Trial s(ctx, backend);
    switch (c) {
        case kOverrun: return overrun(s);
        case kKilled: return holder_process_trial(s, true);
        case kNodeClock: return skewed(s, true);
        case kServerClock: return skewed(s, false);
        default: return holder_process_trial(s, false);
    }
}

void forced(DemoContext& ctx, const RaceCase& rc) {
    MysqlPool& db = ctx.services().db();
    JobRunRecord::create_table(db);
    db.execute(
        "CREATE TABLE IF NOT EXISTS demo_o4_effects (id BIGINT AUTO_INCREMENT PRIMARY KEY, job VARCHAR(190) NOT NULL, "
        "slot BIGINT NOT NULL, token BIGINT NOT NULL, KEY (job))");
    struct Row {
        Result result;
        std::string backend;
        int c;
        std::vector<Trial> trials;
        std::vector<std::string> errors;
    };
    std::vector<Row> rows;
    for (const auto& b : backends()) {
        for (int c = 0; c < kCases; ++c) {
            if (auto r = ctx.row(rc, label(b, c), Mode::Forced)) rows.push_back({std::move(*r), b, c, {}, {}});
        }
    }
    if (rows.empty()) return;
    ctx.progress("duplicate-job: O4, overrun / SIGKILL / clock skew / SIGSTOP rows (" + std::to_string(rows.size()) +
                 ", all at once)");
    // The trials of every row at once, at most kConcurrentTrials at a time (a trial's two
    // services, or its holder process, are its own): run i of every row, then run i + 1.
    const int n = ctx.options().repeat;
    std::vector<std::pair<Row*, int>> tasks;
    for (auto& row : rows) {
        row.trials.resize(static_cast<std::size_t>(n));
        row.errors.resize(static_cast<std::size_t>(n));
    }
    for (int i = 0; i < n; ++i) {
        for (auto& row : rows) tasks.emplace_back(&row, i);
    }
    std::atomic<std::size_t> next{0};
    std::vector<std::thread> threads;
    for (std::size_t w = 0; w < std::min<std::size_t>(tasks.size(), kConcurrentTrials); ++w) {
        threads.emplace_back([&] {
            for (std::size_t k = next.fetch_add(1); k < tasks.size(); k = next.fetch_add(1)) {
                auto [row, i] = tasks[k];
                try {
                    row->trials[static_cast<std::size_t>(i)] = trial(ctx, row->backend, row->c);
                } catch (const std::exception& e) {
                    row->errors[static_cast<std::size_t>(i)] = e.what();
                }
            }
        });
    }
    for (auto& t : threads) t.join();
    for (auto& row : rows) {
        Result& r = row.result;
        int reproduced = 0;
        for (const auto& t : row.trials) reproduced += t.reproduced;
        for (const auto& e : row.errors) {
            if (!e.empty() && r.error.empty()) r.error = e;
        }
        r.observed = reproduced > 0 ? Outcome::Reproduced : Outcome::Prevented;
        const Trial& shown = row.trials.front();
        r.evidence = (n > 1 ? std::to_string(reproduced) + " of " + std::to_string(n) + " reproduced; first: " : "") +
                     shown.evidence;
        r.metric("runs", n).metric("reproduced_runs", reproduced);
        // Each measure's median over the runs (the evidence shows the first run's values).
        for (std::size_t m = 0; m < shown.metrics.size(); ++m) {
            Samples values;
            for (const auto& t : row.trials) {
                if (m < t.metrics.size()) values.add(t.metrics[m].second);
            }
            r.metric(shown.metrics[m].first, values.percentile(50));
            if (shown.metrics[m].first == "took_over_after_ms") r.metric("took_over_after_max_ms", values.max());
        }
        ctx.add(std::move(r));
    }
}

}  // namespace

void add_race_o4_cases() {
    RaceCase c{"duplicate-job", "O4",
               "the job overruns at_most_for; its holder is SIGKILLed or SIGSTOPped mid-job; node clocks 5 s ahead and "
               "behind (each backend, all at once)",
               {"node A: runs the slot (in a process of its own for SIGKILL / SIGSTOP), overruns, or reads a skewed clock",
                "node B: runs the slot once A's hold is gone (cap, lease, session) unless refused; A commits late"},
               "",
               {},
               forced,
               nullptr};
    for (const auto& b : backends()) {
        for (int k = 0; k < kCases; ++k) c.rows.push_back({label(b, k), Mode::Forced, kExpected[k]});
    }
    add_race(std::move(c));
}

}  // namespace lockstep::demo
