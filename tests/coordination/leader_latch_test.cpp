// LeaderLatch over the real backends: one leader among several latches, a standby elected when
// the leader closes, dies (SIGKILL) or stops (SIGSTOP) past its lease, and the deposed leader's
// late write refused by the database's fence check with its old epoch.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends.h"
#include "conformance_child.h"
#include "child_role.h"
#include "eventually.h"
#include "lockstep/coordination/leader_latch.h"
#include "lockstep/core/error.h"
#include "lockstep/core/uri.h"
#include "lockstep/db/fenced_write.h"
#include "lockstep/db/mysql_pool.h"
#include "test_servers.h"

namespace {

using namespace lockstep;
using namespace std::chrono_literals;

using lockstep::test::child::env;
using lockstep::test::child::say;

// A leader candidate in its own process: prints ELECTED <epoch> / REVOKED <reason>, and on
// "WRITE <v>" writes v under the epoch it was elected with (whatever it believes now).
int latch_candidate_role() {
    LockServiceOptions so;
    so.prefix = env("PREFIX");
    auto service = open_lock_service(env("LOCKSTEP_CT_URL"), so);
    std::atomic<FenceToken> elected_epoch{0};
    LeaderLatchOptions o;
    o.lock.lease = std::chrono::milliseconds(std::stoll(env("LEASE_MS")));
    o.on_elected = [&](FenceToken epoch) {
        elected_epoch = epoch;
        say("ELECTED " + std::to_string(epoch));
    };
    o.on_revoked = [](const Revocation& r) { say("REVOKED " + std::string(to_string(r.reason))); };
    LeaderLatch latch(*service, env("NAME"), o);
    latch.start();
    std::string cmd;
    while (std::getline(std::cin, cmd)) {
        if (cmd.rfind("WRITE ", 0) == 0) {
            try {
                MysqlPool pool(parse_mysql_url(env("MYSQL_URL")));
                FencedUpdate u{.assignments = "v = ?", .params = {std::stoll(cmd.substr(6))}, .table = "coord_latch_fenced"};
                fenced_update(pool, 1, elected_epoch.load(), u);
                say("WRITE applied");
            } catch (const ConflictError&) {
                say("WRITE refused");
            } catch (const std::exception& e) {
                say(std::string("WRITE error ") + e.what());
            }
        }
    }
    return 0;
}

// Child roles of this file are named by LOCKSTEP_COORDINATION_CHILD (the Child helper's own role
// variable is left empty, so no other file's runner claims the process).
struct RunLatchChildRole {
    RunLatchChildRole() { lockstep::test::child::run_if_named("LOCKSTEP_COORDINATION_CHILD", "latch-candidate", latch_candidate_role); }
} run_child_role;

}  // namespace

namespace lockstep::test {
namespace {

using Clock = std::chrono::steady_clock;

std::string fresh_prefix() {
    static std::atomic<int> n{0};
    return "ll" + std::to_string(::getpid()) + "_" + std::to_string(n.fetch_add(1)) + ":";
}

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// What a latch's callbacks saw.
struct Seen {
    std::mutex mutex;
    std::vector<FenceToken> elected;
    std::vector<Revocation> revoked;
    std::size_t revocations() {
        std::lock_guard g(mutex);
        return revoked.size();
    }
    Revocation last_revocation() {
        std::lock_guard g(mutex);
        return revoked.back();
    }
};

LeaderLatchOptions watched(Seen& seen, LockOptions lock = {}) {
    LeaderLatchOptions o;
    o.lock = lock;
    o.on_elected = [&seen](FenceToken e) {
        std::lock_guard g(seen.mutex);
        seen.elected.push_back(e);
    };
    o.on_revoked = [&seen](const Revocation& r) {
        std::lock_guard g(seen.mutex);
        seen.revoked.push_back(r);
    };
    return o;
}

class LeaderLatchTest : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        if (backend_url(GetParam()).empty()) GTEST_SKIP() << GetParam() << " is not available here";
        traits_ = backend_traits(GetParam());
        prefix_ = fresh_prefix();
    }
    // A service per latch ("process"), except in memory (threads stand for processes there).
    LockService& service(std::size_t i) {
        if (!traits_.cross_process) i = 0;
        while (services_.size() <= i) services_.push_back(open_backend(GetParam(), prefix_));
        return *services_[i];
    }
    std::map<std::string, std::string> child_env() {
        return {{"LOCKSTEP_COORDINATION_CHILD", "latch-candidate"}, {"LOCKSTEP_CT_URL", backend_url(GetParam())},
                {"PREFIX", prefix_}, {"NAME", "leader"},
                {"LEASE_MS", std::to_string(traits_.short_lease.lease.count())}, {"MYSQL_URL", servers().mysql_url()}};
    }

    BackendTraits traits_;
    std::string prefix_;
    std::vector<std::unique_ptr<LockService>> services_;
};

int leaders(const std::vector<std::unique_ptr<LeaderLatch>>& latches) {
    int n = 0;
    for (const auto& l : latches) n += l->is_leader() ? 1 : 0;
    return n;
}

TEST_P(LeaderLatchTest, OneLeaderAmongThreeLatchesAndAnotherWhenItCloses) {
    std::vector<Seen> seen(3);
    std::vector<std::unique_ptr<LeaderLatch>> latches;
    for (std::size_t i = 0; i < 3; ++i) {
        latches.push_back(std::make_unique<LeaderLatch>(service(i), "leader", watched(seen[i])));
    }
    for (auto& l : latches) l->start();
    ASSERT_TRUE(eventually([&] { return leaders(latches) == 1; }));
    // For a whole second (several campaign slices of the standbys), never two leaders.
    const auto until = Clock::now() + 1s;
    while (Clock::now() < until) {
        ASSERT_EQ(leaders(latches), 1);
        std::this_thread::sleep_for(5ms);
    }
    std::size_t first = 0;
    while (!latches[first]->is_leader()) ++first;
    const FenceToken first_epoch = latches[first]->epoch();
    EXPECT_GT(first_epoch, 0);
    const std::stop_token first_term = latches[first]->term_stop_token();
    EXPECT_FALSE(first_term.stop_requested());

    const auto closed_at = Clock::now();
    latches[first]->close();
    EXPECT_TRUE(first_term.stop_requested());
    EXPECT_FALSE(latches[first]->is_leader());
    EXPECT_EQ(latches[first]->epoch(), 0);
    ASSERT_EQ(seen[first].revocations(), 1u);
    EXPECT_EQ(seen[first].last_revocation().reason, RevokeReason::Closed);
    EXPECT_EQ(seen[first].last_revocation().epoch, first_epoch);

    ASSERT_TRUE(eventually([&] { return leaders(latches) == 1; }));
    std::cout << "[ measure ] " << GetParam() << ": a standby elected " << ms_since(closed_at)
              << " ms after the leader closed\n";
    std::size_t second = 0;
    while (!latches[second]->is_leader()) ++second;
    EXPECT_NE(second, first);
    EXPECT_GT(latches[second]->epoch(), first_epoch);
}

TEST_P(LeaderLatchTest, AHoldLostEndsTheTermAtOnceAndTheLatchCampaignsAgain) {
    Seen seen;
    LockOptions lock = traits_.short_lease;
    LeaderLatch latch(service(0), "leader", watched(seen, lock));
    latch.start();
    ASSERT_TRUE(latch.await_leadership(10s));
    const FenceToken epoch = latch.epoch();
    const std::stop_token term = latch.term_stop_token();

    const auto lost_at = Clock::now();
    force_loss(GetParam(), service(0), prefix_, "leader");
    ASSERT_TRUE(eventually([&] { return term.stop_requested(); }));
    std::cout << "[ measure ] " << GetParam() << ": term ended " << ms_since(lost_at)
              << " ms after the hold was taken away\n";
    ASSERT_TRUE(eventually([&] { return seen.revocations() == 1; }));
    EXPECT_EQ(seen.last_revocation().reason, RevokeReason::HoldLost);
    EXPECT_EQ(seen.last_revocation().epoch, epoch);
    ASSERT_TRUE(latch.await_leadership(15s));
    EXPECT_GT(latch.epoch(), epoch);
    EXPECT_EQ(latch.terms(), 2);
}

TEST_P(LeaderLatchTest, CloseFromACallbackIsRefused) {
    std::unique_ptr<LeaderLatch> latch;
    std::atomic<int> refused{0};
    LeaderLatchOptions o;
    o.on_elected = [&](FenceToken) {
        try {
            latch->close();
        } catch (const ConfigError&) {
            refused.fetch_add(1);
        }
    };
    latch = std::make_unique<LeaderLatch>(service(0), "leader", o);
    latch->start();
    ASSERT_TRUE(latch->await_leadership(10s));
    EXPECT_TRUE(eventually([&] { return refused.load() == 1; }));
    EXPECT_THROW(latch->start(), ConfigError);
    latch->close();
    EXPECT_FALSE(latch->is_leader());
    EXPECT_FALSE(latch->await_leadership(10ms));
}

TEST_P(LeaderLatchTest, AKilledLeaderIsReplacedWithinItsLeasePlusOneSecond) {
    if (!traits_.cross_process) GTEST_SKIP() << GetParam() << " locks do not reach another process";
    Child leader("", child_env());
    ASSERT_TRUE(leader.expect("ELECTED", 20s)) << "the child was not elected";
    Seen seen;
    LeaderLatch standby(service(0), "leader", watched(seen, traits_.short_lease));
    standby.start();
    EXPECT_FALSE(standby.await_leadership(300ms));

    const auto killed_at = Clock::now();
    leader.signal(SIGKILL);
    leader.wait();
    ASSERT_TRUE(standby.await_leadership(30s));
    const double took = ms_since(killed_at);
    std::cout << "[ measure ] " << GetParam() << ": standby elected " << took << " ms after SIGKILL of the leader (bound "
              << traits_.kill_bound.count() + 1000 << " ms)\n";
    EXPECT_LT(took, static_cast<double>(traits_.kill_bound.count() + 1000));
}

TEST_P(LeaderLatchTest, AStoppedLeaderIsDeposedAndItsLateWriteIsRefused) {
    if (!traits_.cross_process) GTEST_SKIP() << GetParam() << " locks do not reach another process";
    MysqlPool pool(servers().mysql_options());
    pool.execute("CREATE TABLE IF NOT EXISTS coord_latch_fenced (id BIGINT PRIMARY KEY, v BIGINT, fence BIGINT NOT NULL DEFAULT 0)");
    pool.execute("REPLACE INTO coord_latch_fenced (id, v, fence) VALUES (1, 0, 0)");

    Child old_leader("", child_env());
    const auto elected = old_leader.expect("ELECTED ", 20s);
    ASSERT_TRUE(elected) << "the child was not elected";
    const FenceToken old_epoch = std::stoll(elected->substr(8));
    Seen seen;
    LeaderLatch standby(service(0), "leader", watched(seen, traits_.short_lease));
    standby.start();

    old_leader.signal(SIGSTOP);
    const auto stopped_at = Clock::now();
    ASSERT_TRUE(standby.await_leadership(30s));
    std::cout << "[ measure ] " << GetParam() << ": standby elected " << ms_since(stopped_at)
              << " ms after SIGSTOP of the leader (stop bound " << traits_.stop_bound.count() << " ms)\n";
    const FenceToken new_epoch = standby.epoch();
    EXPECT_GT(new_epoch, old_epoch);
    EXPECT_TRUE(fenced_update(pool, 1, new_epoch, {.assignments = "v = ?", .params = {2}, .table = "coord_latch_fenced"}));

    // Resumed, the old leader writes at once with the epoch it was elected with: whether or not
    // it has noticed yet that it was deposed, the fence refuses the write.
    old_leader.signal(SIGCONT);
    old_leader.send("WRITE 1");
    std::string write_reply;
    bool revoked = false;
    const auto deadline = Clock::now() + 20s;
    while ((write_reply.empty() || !revoked) && Clock::now() < deadline) {
        const auto line = old_leader.expect("", 1s);
        if (!line) continue;
        if (line->rfind("WRITE", 0) == 0) write_reply = *line;
        if (line->rfind("REVOKED", 0) == 0) revoked = true;
    }
    EXPECT_EQ(write_reply, "WRITE refused");
    EXPECT_EQ(pool.query_one("SELECT v FROM coord_latch_fenced WHERE id = 1")->get<std::int64_t>("v"), 2);
    EXPECT_TRUE(revoked) << "the resumed leader did not learn it was deposed";
    EXPECT_TRUE(standby.is_leader());
}

INSTANTIATE_TEST_SUITE_P(Backends, LeaderLatchTest, ::testing::ValuesIn(every_backend()),
                         [](const auto& info) { return backend_test_name(info.param); });

}  // namespace
}  // namespace lockstep::test
