// Scheduled jobs over every lock backend (RACES O4): the slot comes from the server's clock, a
// late node skips a slot already run, the run record lets exactly one run of a slot commit.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>

#include "../support/eventually.h"
#include "backends.h"
#include "conformance_child.h"
#include "child_role.h"
#include "lockstep/coordination/job_lock.h"
#include "lockstep/coordination/job_run_record.h"
#include "lockstep/coordination/job_schedule.h"
#include "lockstep/core/error.h"
#include "lockstep/core/uri.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/db/transaction.h"
#include "test_servers.h"

namespace {

using namespace lockstep;

using lockstep::test::child::env;
using lockstep::test::child::say;

// A node in its own process that runs one slot of JOB. RECORD=first: the job opens its
// transaction and records the run, says RUNNING <slot> <token>, then waits (to be killed).
// RECORD=last: it says RUNNING <slot> <token> and waits for COMMIT before it records the run
// and commits; then says COMMITTED or REFUSED.
int job_holder_role() {
    LockServiceOptions so;
    so.prefix = env("PREFIX");
    auto service = open_lock_service(env("LOCKSTEP_CT_URL"), so);
    MysqlPool pool(parse_mysql_url(env("MYSQL_URL")));
    JobLockOptions o;
    o.boundary_wait = std::chrono::milliseconds(100);
    if (const auto lease = env("LEASE_MS"); !lease.empty()) o.lock.lease = std::chrono::milliseconds(std::stoll(lease));
    o.run_record = &pool;
    JobLock lock(*service, env("JOB"), JobSchedule::every(std::chrono::milliseconds(std::stoll(env("PERIOD_MS")))), o);
    const bool record_first = env("RECORD") == "first";
    const JobRun run = lock.run_once([&](JobContext& ctx) {
        const std::string running = "RUNNING " + std::to_string(ctx.slot().index) + " " + std::to_string(ctx.fence_token());
        if (record_first) {
            Transaction tx(pool);
            ctx.record_run(tx);
            say(running);
            std::string line;
            std::getline(std::cin, line);  // killed while it waits here
            return;
        }
        say(running);
        std::string line;
        if (!std::getline(std::cin, line) || line != "COMMIT") return;
        try {
            Transaction tx(pool);
            ctx.record_run(tx);
            tx.commit();
            say("COMMITTED");
        } catch (const ConflictError&) {
            say("REFUSED");
        }
    });
    if (run.outcome == JobOutcome::Skipped) say("SKIPPED " + run.skip_reason);
    return 0;
}

// Child roles of this file are named by LOCKSTEP_COORDINATION_CHILD (the Child helper's own role
// variable is left empty, so no other file's runner claims the process).
struct RunJobChildRole {
    RunJobChildRole() { lockstep::test::child::run_if_named("LOCKSTEP_COORDINATION_CHILD", "job-holder", job_holder_role); }
} run_child_role;

}  // namespace

namespace lockstep::test {
namespace {

using namespace std::chrono_literals;

// The jobs' lease: renewed every 200 ms while a holder runs.
constexpr std::chrono::milliseconds kTestLease{600};

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

// The run record's fence, every path of its one-statement upsert: a new fence row, a fence raised
// by a newer token, a fence kept by the same token, a stale token refused, and a refused record
// that rolls back leaving the fence as it was.
TEST(JobRunRecordTest, AStaleTokenIsRefusedWhicheverWayTheFenceRowWasWritten) {
    MysqlPool pool(servers().mysql_options());
    JobRunRecord::create_table(pool);
    const std::string job = "fence-" + fresh_prefix();
    const auto started = std::chrono::system_clock::now();
    auto record = [&](std::int64_t slot, std::int64_t token) {
        Transaction tx(pool);
        JobRunRecord::record(tx, job, slot, token, "test", started);
        tx.commit();
    };
    auto fence = [&] {
        return pool.query_one("SELECT fence FROM lockstep_job_fences WHERE job = ?", {job})->get<std::int64_t>("fence");
    };
    record(1, 5);  // the job's first record: the upsert inserts the fence row
    EXPECT_EQ(fence(), 5);
    record(2, 7);  // a newer token raises it
    EXPECT_EQ(fence(), 7);
    EXPECT_THROW(record(3, 6), JobFenceError) << "a token older than the fence recorded a run";
    EXPECT_EQ(fence(), 7);
    EXPECT_FALSE(JobRunRecord::find(pool, job, 3));
    record(3, 7);  // the same token, another slot: the fence is kept and the run recorded
    EXPECT_THROW(record(3, 8), JobSlotTakenError);
    EXPECT_EQ(fence(), 7) << "the refused record's raise of the fence rolled back with it";
    EXPECT_THROW(record(1, 4), JobFenceError) << "refused before the slot's row is looked at";
    EXPECT_EQ(JobRunRecord::count(pool, job), 3);
    const auto rec = JobRunRecord::find(pool, job, 2);
    ASSERT_TRUE(rec);
    EXPECT_EQ(rec->token, 7);
}

// Two records of one job at once: the upsert's row lock makes the second wait for the first, which
// commits a newer token; the second then reads the committed fence (not its snapshot) and is refused.
TEST(JobRunRecordTest, ARecordWaitingOnANewerOneIsRefusedWhenThatOneCommits) {
    MysqlPool pool(servers().mysql_options());
    JobRunRecord::create_table(pool);
    const std::string job = "fence-wait-" + fresh_prefix();
    const auto started = std::chrono::system_clock::now();
    {
        Transaction tx(pool);
        JobRunRecord::record(tx, job, 1, 10, "test", started);
        tx.commit();
    }
    auto newer = std::make_unique<Transaction>(pool);
    JobRunRecord::record(*newer, job, 2, 20, "newer", started);
    std::atomic<bool> refused{false}, other{false};
    std::string other_what;  // written by `older` before it ends, read after the join
    std::thread older([&] {
        try {
            Transaction tx(pool);
            JobRunRecord::record(tx, job, 3, 15, "older", started);
            tx.commit();
        } catch (const JobFenceError&) {
            refused = true;
        } catch (const std::exception& e) {
            other_what = e.what();
            other = true;
        }
    });
    // The older record is blocked on the fence row's lock (not sleep-and-hope: the server says its
    // upsert is still executing, which an unblocked upsert is for microseconds only). PROCESSLIST,
    // not information_schema.INNODB_TRX, which showed the test's user one transaction of the two.
    std::string probe_error;
    const bool waiting = eventually(
        [&] {
            try {
                return pool.query_one("SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST "
                                      "WHERE INFO LIKE 'INSERT INTO lockstep_job_fences%'")
                           ->get<std::int64_t>("n") > 0;
            } catch (const std::exception& e) {
                probe_error = e.what();
                return false;
            }
        },
        10s);
    newer->commit();
    newer.reset();
    older.join();
    ASSERT_TRUE(waiting) << "the second record did not wait for the first's row lock " << other_what << probe_error;
    EXPECT_TRUE(refused) << "a token older than a committed one recorded a run";
    EXPECT_FALSE(other) << other_what;
    EXPECT_FALSE(JobRunRecord::find(pool, job, 3));
    EXPECT_TRUE(JobRunRecord::find(pool, job, 2));
}

class JobLockTest : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        if (backend_url(GetParam()).empty()) GTEST_SKIP() << GetParam() << " is not available here";
        prefix_ = fresh_prefix();
        a_ = open_backend(GetParam(), prefix_);
        if (backend_traits(GetParam()).cross_process) b_ = open_backend(GetParam(), prefix_);
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

// The service a node uses, counting its reads of the server's clock (the round trips
// LockService::server_time() costs); everything else is the real backend's.
class ClockReadCounter final : public LockService {
public:
    explicit ClockReadCounter(LockService& real) : real_(real) {}
    std::unique_ptr<DistributedMutex> make_mutex(std::string name, LockOptions options) override {
        return real_.make_mutex(std::move(name), std::move(options));
    }
    std::unique_ptr<DistributedReadWriteLock> make_read_write_lock(std::string name, LockOptions options) override {
        return real_.make_read_write_lock(std::move(name), std::move(options));
    }
    bool supports_read_write() const noexcept override { return real_.supports_read_write(); }
    std::string_view backend() const noexcept override { return real_.backend(); }
    std::chrono::system_clock::time_point server_time() override {
        reads.fetch_add(1);
        return real_.server_time();
    }
    std::atomic<int> reads{0};

private:
    LockService& real_;
};

// The slot comes from the grant's own stamp where the backend gives one (Redis): a run costs the
// lock and no read of the server's clock; elsewhere one read, after the grant. A node that ran
// the slot skips it again without a read while its steady clock says the slot cannot have ended.
TEST_P(JobLockTest, ASlotIsRunAndSkippedAgainWithoutReadingTheServersClockWhenTheGrantIsStamped) {
    const auto schedule = JobSchedule::every(2000ms);
    ClockReadCounter counted(a());
    JobLockOptions o;
    o.boundary_wait = 100ms;
    o.lock.lease = kTestLease;
    JobLock lock(counted, "stamped", schedule, o);
    bool stamped = false;
    {
        Hold probe = a().make_mutex("stamp-probe")->acquire();
        stamped = probe.server_time_at_grant().has_value();
    }
    if (GetParam() == "redis") {
        EXPECT_TRUE(stamped) << "the Redis acquire script returns its TIME";
    }
    await_slot_start(a(), schedule);
    int runs = 0;
    const JobRun first = lock.run_once([&](JobContext&) { ++runs; });
    ASSERT_EQ(first.outcome, JobOutcome::Ran) << first.skip_reason;
    EXPECT_EQ(counted.reads.load(), stamped ? 0 : 1);
    const int after_first = counted.reads.load();
    const JobRun again = lock.run_once([&](JobContext&) { ++runs; });
    EXPECT_EQ(again.outcome, JobOutcome::Skipped);
    EXPECT_EQ(again.skip_reason, "this node already ran the slot");
    EXPECT_EQ(again.slot.index, first.slot.index);
    EXPECT_EQ(counted.reads.load(), after_first) << "the second call asked the server what this node knew";
    EXPECT_EQ(runs, 1);
}

// A node whose timer fires just before a slot's end while the job's lock is still held waits
// (boundary_wait) and wins it after the boundary: it runs the new slot, the one the server's
// clock is in at the acquisition, not the one its first clock read fell in.
TEST_P(JobLockTest, ANodeThatWinsTheLockAcrossASlotBoundaryRunsTheNewSlot) {
    const auto schedule = JobSchedule::every(1000ms);
    JobLockOptions o;
    o.boundary_wait = 800ms;
    o.lock.lease = kTestLease;
    JobLock la(a(), "across", schedule, o);
    auto holder = b().make_mutex("job:across");
    await_slot_start(a(), schedule);
    const auto in_slot = a().server_time();
    const JobSlot before = schedule.slot_at(in_slot);
    std::this_thread::sleep_for(before.end - in_slot - 200ms);  // the scenario: 200 ms before the end
    std::mutex mu;
    std::condition_variable cv;
    bool held = false;
    std::chrono::system_clock::time_point released_at;
    std::thread other([&] {
        holder->lock();
        {
            std::lock_guard l(mu);
            held = true;
        }
        cv.notify_all();
        const auto now = b().server_time();
        std::this_thread::sleep_for(before.end - now + 100ms);  // holds it past the boundary
        released_at = b().server_time();
        holder->unlock();
    });
    {
        std::unique_lock l(mu);
        ASSERT_TRUE(cv.wait_for(l, 5s, [&] { return held; }));
    }
    const auto called_at = a().server_time();
    int runs = 0;
    const JobRun r = la.run_once([&](JobContext&) { ++runs; });
    other.join();
    if (called_at >= before.end) GTEST_SKIP() << "the machine was too slow to call run_once before the boundary";
    ASSERT_GE(released_at, before.end);
    EXPECT_EQ(r.outcome, JobOutcome::Ran) << r.skip_reason;
    EXPECT_EQ(r.slot.index, before.index + 1) << "the slot must be the one the lock was won in";
    EXPECT_EQ(r.slot.index, schedule.slot_at(released_at).index);
    EXPECT_EQ(runs, 1);
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

double ms_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// A node of its own process that runs the slot, started at a slot's start.
class JobHolderProcessTest : public JobLockTest {
protected:
    static constexpr std::chrono::milliseconds kPeriod{4000};

    void SetUp() override {
        JobLockTest::SetUp();
        if (IsSkipped()) return;
        if (!backend_traits(GetParam()).cross_process) GTEST_SKIP() << GetParam() << " locks do not reach another process";
        JobRunRecord::create_table(pool_);
        job_ = "holder-" + prefix_.substr(0, prefix_.size() - 1);
    }
    std::unique_ptr<Child> start_holder(const std::string& record) {
        await_slot_start(a(), JobSchedule::every(kPeriod));
        const auto traits = backend_traits(GetParam());
        std::map<std::string, std::string> env{{"LOCKSTEP_COORDINATION_CHILD", "job-holder"},
                                               {"LOCKSTEP_CT_URL", backend_url(GetParam())},
                                               {"PREFIX", prefix_},
                                               {"JOB", job_},
                                               {"PERIOD_MS", std::to_string(kPeriod.count())},
                                               {"MYSQL_URL", servers().mysql_url()},
                                               {"RECORD", record}};
        if (traits.short_lease.lease.count() > 0) env["LEASE_MS"] = std::to_string(traits.short_lease.lease.count());
        return std::make_unique<Child>("", env);
    }
    // This process's node: tries the slot until it runs it (each try waits boundary_wait).
    JobRun take_over(JobLock& lock, std::chrono::milliseconds bound) {
        JobRun r;
        eventually(
            [&] {
                r = lock.run_once([&](JobContext& run) {
                    Transaction tx(pool_);
                    run.record_run(tx);
                    tx.commit();
                });
                return r.outcome != JobOutcome::Skipped;
            },
            bound, 20ms);
        return r;
    }
    JobLockOptions options() {
        JobLockOptions o;
        o.boundary_wait = 100ms;
        o.run_record = &pool_;
        return o;
    }
    MysqlPool pool_{servers().mysql_options()};
    std::string job_;
};

// The holder SIGKILLed mid-job, its run recorded but not committed: the slot is run again once
// the backend lets the lock go (the lease; at once with MySQL, whose server ends the killed
// client's session), and only that run commits.
TEST_P(JobHolderProcessTest, AHolderKilledMidJobLeavesTheSlotToTheNextNodeAfterItsBound) {
    auto holder = start_holder("first");
    const auto running = holder->expect("RUNNING ", 20s);
    ASSERT_TRUE(running) << "the holder did not start the job";
    const std::int64_t slot = std::stoll(running->substr(8));
    const std::int64_t token = std::stoll(running->substr(running->rfind(' ') + 1));
    JobLock node(a(), job_, JobSchedule::every(kPeriod), options());
    EXPECT_EQ(node.run_once([](JobContext&) { ADD_FAILURE() << "ran while the holder held the slot"; }).outcome,
              JobOutcome::Skipped);

    const auto killed = std::chrono::steady_clock::now();
    holder->signal(SIGKILL);
    holder->wait();
    const JobRun r = take_over(node, 3000ms);
    const double took = ms_since(killed);
    const auto bound = backend_traits(GetParam()).kill_bound + 1000ms;
    std::cout << "[ measure ] " << GetParam() << ": the slot ran again " << took << " ms after SIGKILL of its holder (bound "
              << bound.count() << " ms)\n";
    ASSERT_EQ(r.outcome, JobOutcome::Ran) << r.skip_reason;
    EXPECT_EQ(r.slot.index, slot) << "the next node ran another slot: the killed holder's slot was never run";
    EXPECT_GT(r.token, token);
    EXPECT_LT(took, static_cast<double>(bound.count()));
    EXPECT_EQ(JobRunRecord::count(pool_, job_), 1) << "the slot has more than one committed run";
    const auto rec = JobRunRecord::find(pool_, job_, slot);
    ASSERT_TRUE(rec);
    EXPECT_EQ(rec->token, r.token);
}

// The holder SIGSTOPped mid-job past its bound: the next node runs and commits the slot; the
// holder, resumed, records its run with its old token and is refused.
TEST_P(JobHolderProcessTest, AHolderStoppedPastItsBoundHasItsLateCommitRefused) {
    auto holder = start_holder("last");
    const auto running = holder->expect("RUNNING ", 20s);
    ASSERT_TRUE(running) << "the holder did not start the job";
    const std::int64_t slot = std::stoll(running->substr(8));
    JobLock node(a(), job_, JobSchedule::every(kPeriod), options());

    holder->signal(SIGSTOP);
    const auto stopped = std::chrono::steady_clock::now();
    const JobRun r = take_over(node, 3000ms);
    std::cout << "[ measure ] " << GetParam() << ": the slot ran again " << ms_since(stopped)
              << " ms after SIGSTOP of its holder (stop bound " << backend_traits(GetParam()).stop_bound.count() << " ms)\n";
    holder->signal(SIGCONT);
    ASSERT_EQ(r.outcome, JobOutcome::Ran) << r.skip_reason;
    EXPECT_EQ(r.slot.index, slot);
    holder->send("COMMIT");
    const auto answer = holder->expect("", 20s);
    ASSERT_TRUE(answer);
    EXPECT_EQ(*answer, "REFUSED") << "the stopped holder's late commit went through";
    EXPECT_EQ(JobRunRecord::count(pool_, job_), 1);
    EXPECT_EQ(JobRunRecord::find(pool_, job_, slot)->token, r.token);
}

INSTANTIATE_TEST_SUITE_P(Backends, JobHolderProcessTest, ::testing::ValuesIn(every_backend()),
                         [](const auto& info) { return backend_test_name(info.param); });


INSTANTIATE_TEST_SUITE_P(Backends, JobLockTest, ::testing::ValuesIn(every_backend()),
                         [](const auto& info) { return backend_test_name(info.param); });

}  // namespace
}  // namespace lockstep::test
