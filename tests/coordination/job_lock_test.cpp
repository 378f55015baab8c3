// Scheduled jobs over every lock backend (RACES O4): the slot comes from the server's clock, a
// late node skips a slot already run, the run record lets exactly one run of a slot commit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "../support/eventually.h"
#include "job_backends.h"
#include "lockstep/coordination/job_lock.h"
#include "lockstep/coordination/job_run_record.h"
#include "lockstep/coordination/job_schedule.h"
#include "lockstep/core/error.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/db/transaction.h"
#include "test_servers.h"

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

std::string fresh_prefix() {
    static std::atomic<int> n{0};
    return "jl" + std::to_string(::getpid()) + "_" + std::to_string(n.fetch_add(1)) + ":";
}

// Sleeps until just after the next slot's start (server time), so a test's timeline fits in one slot.
void await_slot_start(LockService& s, const JobSchedule& schedule) {
    const auto now = s.server_time();
    std::this_thread::sleep_for(schedule.slot_at(now).end - now + 30ms);
}

TEST(JobScheduleTest, APeriodicSlotCoversItsPeriodFromTheOffset) {
    const auto s = JobSchedule::every(1000ms, 200ms);
    const auto slot = s.slot_at(std::chrono::system_clock::time_point(5150ms));
    EXPECT_EQ(slot.index, 4);
    EXPECT_EQ(slot.start.time_since_epoch(), 4200ms);
    EXPECT_EQ(slot.end.time_since_epoch(), 5200ms);
    EXPECT_EQ(s.slot_at(std::chrono::system_clock::time_point(5200ms)).index, 5);
    EXPECT_EQ(s.slot_at(std::chrono::system_clock::time_point(-801ms)).index, -2) << "floor, not truncation";
}

TEST(JobScheduleTest, ADailySlotEndsAtTheNextListedTime) {
    const auto s = JobSchedule::daily_at({14h, 2h});
    const auto day = std::chrono::system_clock::time_point(std::chrono::hours(24 * 100));
    const auto morning = s.slot_at(day + 1h);  // before 02:00: yesterday's 14:00 slot
    EXPECT_EQ(morning.start, day - 10h);
    EXPECT_EQ(morning.end, day + 2h);
    const auto noon = s.slot_at(day + 12h);
    EXPECT_EQ(noon.start, day + 2h);
    EXPECT_EQ(noon.end, day + 14h);
    EXPECT_EQ(noon.index, morning.index + 1);
    EXPECT_THROW(JobSchedule::daily_at({}), ConfigError);
    EXPECT_THROW(JobSchedule::daily_at({25h}), ConfigError);
    EXPECT_THROW(JobSchedule::every(0ms), ConfigError);
}

class JobLockTest : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        if (job_backend_url(GetParam()).empty()) GTEST_SKIP() << GetParam() << " is not available here";
        prefix_ = fresh_prefix();
        a_ = open_job_backend(GetParam(), prefix_);
        if (cross_process(GetParam())) b_ = open_job_backend(GetParam(), prefix_);
    }
    LockService& a() { return *a_; }
    LockService& b() { return b_ ? *b_ : *a_; }  // memory: threads of one service are the nodes
    std::string prefix_;
    std::unique_ptr<LockService> a_, b_;
};

TEST_P(JobLockTest, ServerTimeIsTheServersClockNotAGuess) {
    const auto before = std::chrono::system_clock::now();
    const auto t = a().server_time();
    const auto after = std::chrono::system_clock::now();
    // The private servers run on this machine: their clock is this machine's (ms resolution on ZooKeeper).
    EXPECT_GE(t, before - 5ms);
    EXPECT_LE(t, after + 5ms);
}

// O4 forced: node A fires on time and runs the slot (50 ms); node B fires 300 ms late in the
// same slot. The mutex recipe (try_lock, run, unlock) runs it twice; JobLock once.
TEST_P(JobLockTest, MutexRecipeRunsTheSlotTwiceWhenANodeFires300msLate) {
    const auto schedule = JobSchedule::every(2000ms);
    await_slot_start(a(), schedule);
    std::atomic<int> runs{0};
    auto node = [&](LockService& s) {
        auto m = s.make_mutex("job:recipe");
        if (!m->try_lock()) return;
        runs.fetch_add(1);
        std::this_thread::sleep_for(50ms);
        m->unlock();
    };
    std::thread na([&] { node(a()); });
    na.join();
    std::this_thread::sleep_for(300ms);  // B's timer fires late: the scenario, not a wait for a result
    std::thread nb([&] { node(b()); });
    nb.join();
    EXPECT_EQ(runs.load(), 2) << "O4 reproduced: the plain mutex let the late node run the slot again";
}

TEST_P(JobLockTest, ALateNodeSkipsTheSlotAlreadyRun) {
    const auto schedule = JobSchedule::every(2000ms);
    JobLockOptions o;
    o.boundary_wait = 100ms;
    o.lock.lease = kTestLease;
    JobLock la(a(), "close-unpaid", schedule, o);
    JobLock lb(b(), "close-unpaid", schedule, o);
    await_slot_start(a(), schedule);
    std::atomic<int> runs{0};
    auto job = [&](JobContext&) {
        runs.fetch_add(1);
        std::this_thread::sleep_for(50ms);
    };
    JobRun ra, rb;
    std::thread na([&] { ra = la.run_once(job); });
    na.join();
    std::this_thread::sleep_for(300ms);  // B's timer fires late
    std::thread nb([&] { rb = lb.run_once(job); });
    nb.join();
    EXPECT_EQ(ra.outcome, JobOutcome::Ran);
    EXPECT_EQ(rb.outcome, JobOutcome::Skipped) << rb.skip_reason;
    EXPECT_EQ(ra.slot.index, rb.slot.index);
    EXPECT_EQ(runs.load(), 1);
    EXPECT_GT(ra.token, 0);
}

TEST_P(JobLockTest, NodesWhoseClocksDifferByTenSecondsAgreeOnTheSlot) {
    const auto schedule = JobSchedule::every(2000ms);
    JobLockOptions oa, ob;
    oa.boundary_wait = ob.boundary_wait = 100ms;
    oa.local_clock = [] { return std::chrono::system_clock::now() + 5s; };
    ob.local_clock = [] { return std::chrono::system_clock::now() - 5s; };
    JobLock la(a(), "skewed", schedule, oa);
    JobLock lb(b(), "skewed", schedule, ob);
    await_slot_start(a(), schedule);
    std::atomic<int> runs{0};
    auto job = [&](JobContext&) { runs.fetch_add(1); };
    // What each node would compute from its own clock: slots 5 apart.
    EXPECT_NE(schedule.slot_at(oa.local_clock()).index, schedule.slot_at(ob.local_clock()).index);
    JobRun ra, rb;
    std::thread na([&] { ra = la.run_once(job); });
    na.join();
    std::thread nb([&] { rb = lb.run_once(job); });
    nb.join();
    EXPECT_EQ(ra.slot.index, rb.slot.index) << "the slot comes from the server's clock";
    EXPECT_EQ(runs.load(), 1);
    EXPECT_NEAR(static_cast<double>(ra.local_clock_offset.count()), 5000.0, 1000.0);
    EXPECT_NEAR(static_cast<double>(rb.local_clock_offset.count()), -5000.0, 1000.0);
}

// A job that overruns at_most_for: the hold is released and the stop requested; a second node
// runs the slot (no record yet) and commits; the first one's late commit is refused.
TEST_P(JobLockTest, AnOverrunningJobsLateCommitIsRefusedByTheRunRecord) {
    MysqlPool pool(servers().mysql_options());
    JobRunRecord::create_table(pool);
    const std::string job = "overrun-" + prefix_.substr(0, prefix_.size() - 1);
    const auto schedule = JobSchedule::every(3000ms);
    JobLockOptions o;
    o.boundary_wait = 100ms;
    o.at_least_for = 200ms;
    o.at_most_for = 400ms;
    o.run_record = &pool;
    JobLock la(a(), job, schedule, o);
    JobLock lb(b(), job, schedule, o);
    await_slot_start(a(), schedule);
    std::mutex mu;
    std::condition_variable cv;
    bool a_stopped = false, b_committed = false;
    bool a_refused = false;
    JobRun ra;
    std::thread na([&] {
        ra = la.run_once([&](JobContext& run) {
            {
                std::mutex m;
                std::unique_lock l(m);
                std::condition_variable_any wait;
                wait.wait(l, run.stop_token(), [] { return false; });  // until the cap asks it to stop
            }
            {
                std::unique_lock l(mu);
                a_stopped = true;
                cv.notify_all();
                cv.wait(l, [&] { return b_committed; });
            }
            Transaction tx(pool);
            try {
                run.record_run(tx);
                tx.commit();
            } catch (const ConflictError&) {
                a_refused = true;
            }
        });
    });
    {
        std::unique_lock l(mu);
        ASSERT_TRUE(cv.wait_for(l, 10s, [&] { return a_stopped; }));
    }
    const JobRun rb = lb.run_once([&](JobContext& run) {
        Transaction tx(pool);
        run.record_run(tx);
        tx.commit();
    });
    {
        std::unique_lock l(mu);
        b_committed = true;
        cv.notify_all();
    }
    na.join();
    EXPECT_EQ(ra.outcome, JobOutcome::Overran);
    EXPECT_EQ(rb.outcome, JobOutcome::Ran) << rb.skip_reason;
    EXPECT_EQ(ra.slot.index, rb.slot.index);
    EXPECT_TRUE(a_refused) << "the overrunning run's late commit went through";
    EXPECT_EQ(JobRunRecord::count(pool, job), 1);
    const auto rec = JobRunRecord::find(pool, job, rb.slot.index);
    ASSERT_TRUE(rec);
    EXPECT_EQ(rec->token, rb.token);
}

// A holder paused past its lease (its job thread blocked, renew=false: the lease runs out as it
// would under a SIGSTOP): another node takes the slot over and commits; the paused one's late
// commit is refused by the run record.
TEST_P(JobLockTest, AHolderPausedPastItsLeaseHasItsLateCommitRefused) {
    if (GetParam() != "redis" && GetParam() != "redis-fair" && GetParam() != "redlock") {
        GTEST_SKIP() << "renew=false (a lease that runs out under a live process) is a Redis-family option";
    }
    MysqlPool pool(servers().mysql_options());
    JobRunRecord::create_table(pool);
    const std::string job = "paused-" + prefix_.substr(0, prefix_.size() - 1);
    const auto schedule = JobSchedule::every(4000ms);
    JobLockOptions o;
    o.boundary_wait = 100ms;
    o.lock.lease = 400ms;
    o.lock.renew = false;
    o.run_record = &pool;
    JobLock la(a(), job, schedule, o);
    JobLock lb(b(), job, schedule, o);
    await_slot_start(a(), schedule);
    std::mutex mu;
    std::condition_variable cv;
    bool a_running = false, b_committed = false, a_refused = false;
    JobRun ra;
    std::thread na([&] {
        ra = la.run_once([&](JobContext& run) {
            std::unique_lock l(mu);
            a_running = true;
            cv.notify_all();
            cv.wait(l, [&] { return b_committed; });  // paused until B has run the slot
            l.unlock();
            Transaction tx(pool);
            try {
                run.record_run(tx);
                tx.commit();
            } catch (const ConflictError&) {
                a_refused = true;
            }
        });
    });
    {
        std::unique_lock l(mu);
        ASSERT_TRUE(cv.wait_for(l, 10s, [&] { return a_running; }));
    }
    JobRun rb;
    // B tries (each attempt waits boundary_wait for the lock) until A's lease has run out.
    const bool took_over = eventually(
        [&] {
            rb = lb.run_once([&](JobContext& run) {
                Transaction tx(pool);
                run.record_run(tx);
                tx.commit();
            });
            return rb.outcome != JobOutcome::Skipped;
        },
        3000ms);
    {
        std::unique_lock l(mu);
        b_committed = true;
        cv.notify_all();
    }
    na.join();
    ASSERT_TRUE(took_over);
    EXPECT_EQ(rb.outcome, JobOutcome::Ran);
    EXPECT_EQ(ra.slot.index, rb.slot.index);
    EXPECT_GT(rb.token, ra.token);
    EXPECT_TRUE(a_refused) << "the paused holder's late commit went through";
    EXPECT_EQ(JobRunRecord::count(pool, job), 1);
}

INSTANTIATE_TEST_SUITE_P(Backends, JobLockTest, ::testing::ValuesIn(job_backends()),
                         [](const auto& info) {
                             std::string n = info.param;
                             for (auto& c : n) if (c == '-') c = '_';
                             return n;
                         });

}  // namespace
}  // namespace lockstep::test
