// O4 (docs/races.md): a late node re-runs the round. Node A fires at the slot's start and runs
// the job (50 ms); node B fires 300 ms late in the same slot. Each lock backend in turn (Redis,
// MySQL, ZooKeeper when built): no lock, the try_lock/unlock recipe, JobLock (hold kept until the
// slot ends), JobLock with the run record. Slots of 1 s: a row costs at most ~1.5 s.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "context.h"
#include "lockstep/coordination/job_lock.h"
#include "lockstep/coordination/job_run_record.h"
#include "lockstep/db/transaction.h"
#include "lock_backends.h"
#include "race_case.h"

namespace lockstep::demo {

namespace {

using namespace std::chrono_literals;

constexpr auto kLate = 300ms;
constexpr auto kJob = 50ms;
const char* const kKinds[] = {"no lock", "try_lock/unlock, a node 300 ms late", "JobLock (at_least_for: the slot)",
                              "JobLock + run record"};

// The backends of the rows: redis, mysql and zookeeper (when built).
std::vector<std::string> o4_backends() {
    std::vector<std::string> v;
    for (const auto& b : demo_lock_backends(false)) {
        if (b != "redis-fair") v.push_back(b);
    }
    return v;
}

std::string label(const std::string& backend, int kind) { return std::string(kKinds[kind]) + " over " + backend; }

// Runs one trial; returns how many times the slot ran (committed, for the run-record row).
int trial(DemoContext& ctx, const std::string& backend, int kind) {
    const std::string prefix = ctx.services().prefix() + ctx.unique("o4") + ":";
    auto a = open_demo_lock(ctx.services(), backend, prefix);
    auto late = open_demo_lock(ctx.services(), backend, prefix);
    const auto schedule = JobSchedule::every(1000ms);
    // The run's random prefix keeps run records of earlier demo runs on the same database apart.
    const std::string job = ctx.services().prefix() + ctx.unique("close-unpaid");
    MysqlPool& db = ctx.services().db();
    if (kind == 3) JobRunRecord::create_table(db);
    // Start at a slot's start (server time), so A and the late B share one slot.
    const auto now = a->server_time();
    std::this_thread::sleep_for(schedule.slot_at(now).end - now + 20ms);
    std::atomic<int> runs{0};
    auto work = [&] {
        runs.fetch_add(1);
        std::this_thread::sleep_for(kJob);
    };
    JobLockOptions o;
    o.boundary_wait = 100ms;
    if (kind == 3) o.run_record = &db;
    std::unique_ptr<JobLock> ja, jb;
    if (kind >= 2) {
        ja = std::make_unique<JobLock>(*a, job, schedule, o);
        jb = std::make_unique<JobLock>(*late, job, schedule, o);
    }
    auto node = [&](LockService& s, JobLock* j) {
        if (kind == 0) return work();
        if (kind == 1) {
            auto m = s.make_mutex("job:" + job);
            if (!m->try_lock()) return;
            work();
            m->unlock();
            return;
        }
        j->run_once([&](JobContext& run) {
            if (kind == 2) return work();
            Transaction tx(db);
            run.record_run(tx);
            work();
            tx.commit();
        });
    };
    std::thread na([&] { node(*a, ja.get()); });
    na.join();
    std::this_thread::sleep_for(kLate);  // B's timer fires late: the race itself
    std::thread nb([&] { node(*late, jb.get()); });
    nb.join();
    return kind == 3 ? static_cast<int>(JobRunRecord::count(db, job)) : runs.load();
}

void forced(DemoContext& ctx, const RaceCase& c) {
    for (const auto& b : o4_backends()) {
        for (int kind = 0; kind < 4; ++kind) {
            auto r = ctx.row(c, label(b, kind), Mode::Forced);
            if (!r) continue;
            ctx.progress(std::string("duplicate-job: O4, ") + label(b, kind));
            try {
                // --repeat trials, side by side (each its own job name and pair of services, all
                // in the same slot): a trial waits for a slot's start, so one after the other
                // they would cost a second each.
                const int n = ctx.options().repeat;
                std::vector<int> ran(static_cast<std::size_t>(n), 0);
                std::vector<std::string> errors(static_cast<std::size_t>(n));
                std::vector<std::thread> trials;
                for (int i = 0; i < n; ++i) {
                    trials.emplace_back([&, i] {
                        try {
                            ran[static_cast<std::size_t>(i)] = trial(ctx, b, kind);
                        } catch (const std::exception& e) {
                            errors[static_cast<std::size_t>(i)] = e.what();
                        }
                    });
                }
                for (auto& t : trials) t.join();
                for (const auto& e : errors) {
                    if (!e.empty()) throw std::runtime_error(e);
                }
                const int reproduced = static_cast<int>(std::count_if(ran.begin(), ran.end(), [](int x) { return x > 1; }));
                const int most = *std::max_element(ran.begin(), ran.end());
                r->observed = reproduced > 0 ? Outcome::Reproduced : Outcome::Prevented;
                r->evidence = std::to_string(reproduced) + " of " + std::to_string(n) + " slots ran twice, at most " +
                              std::to_string(most) + " run" + (most == 1 ? "" : "s") + " (node B fired 300 ms late)";
                r->cost = kind >= 2 ? "1 server-time read (2 near a slot boundary) + 1 lock per node per slot" : "";
                r->metric("runs", n).metric("reproduced_runs", reproduced).metric("most_runs_of_a_slot", most);
            } catch (const std::exception& e) {
                r->error = e.what();
            }
            ctx.add(std::move(*r));
        }
    }
}

}  // namespace

void add_race_o4() {
    RaceCase c{"duplicate-job", "O4",
               "node A runs the slot (50 ms) at its start; node B fires 300 ms late in the same slot (each backend)",
               {"node A: fires at the slot's start, runs", "node B: fires 300 ms late, runs unless refused"},
               "",
               {},
               forced,
               nullptr};
    for (const auto& b : o4_backends()) {
        for (int kind = 0; kind < 4; ++kind) {
            c.rows.push_back({label(b, kind), Mode::Forced, kind < 2 ? Outcome::Reproduced : Outcome::Prevented});
        }
    }
    add_race(std::move(c));
}

}  // namespace lockstep::demo
