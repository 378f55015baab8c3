// ChildProcess (servers/include/lockstep/servers/child_process.h) against real children: this test
// binary re-executed with LOCKSTEP_CHILD_PROCESS_TEST_ROLE naming what the child does.
#include "lockstep/servers/child_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lockstep/core/error.h"

namespace {

using namespace std::chrono_literals;
using lockstep::testing::ChildProcess;
using Clock = std::chrono::steady_clock;

constexpr const char* kRoleVariable = "LOCKSTEP_CHILD_PROCESS_TEST_ROLE";
constexpr const char* kValueVariable = "LOCKSTEP_CHILD_PROCESS_TEST_VALUE";

// The child's side, run before gtest's main when the role variable is set:
//   echo    answers each line L with "ECHO L"; exits 0 when its stdin closes.
//   env     says "VALUE <kValueVariable>", then exits 0.
//   exit-7  exits 7 at once, saying nothing.
//   silent  says nothing and reads nothing until it is killed.
struct RunChildRole {
    RunChildRole() {
        const char* role = std::getenv(kRoleVariable);
        if (role == nullptr) return;
        const std::string r = role;
        int rc = 3;
        if (r == "echo") {
            std::string line;
            while (std::getline(std::cin, line)) std::cout << "ECHO " << line << std::endl;
            rc = 0;
        } else if (r == "env") {
            const char* v = std::getenv(kValueVariable);
            std::cout << "VALUE " << (v ? v : "(unset)") << std::endl;
            rc = 0;
        } else if (r == "exit-7") {
            rc = 7;
        } else if (r == "silent") {
            for (;;) ::pause();
        }
        std::cout.flush();
        ::_exit(rc);
    }
} run_child_role;

std::unique_ptr<ChildProcess> start(const std::string& role) {
    return std::make_unique<ChildProcess>(std::vector<std::string>{"child-process-test"},
                                          std::map<std::string, std::string>{{kRoleVariable, role}});
}

TEST(ChildProcessTest, AChildAnswersEachLineAndExitsWhenItsStdinCloses) {
    auto child = start("echo");
    child->send("one");
    EXPECT_EQ(child->read_line(10s), "ECHO one");
    child->send("two");
    EXPECT_EQ(child->expect("ECHO", 10s), "ECHO two");
    child->close_stdin();
    EXPECT_EQ(child->read_line(10s), std::nullopt) << "EOF after the child exits";
    EXPECT_EQ(child->wait(), 0);
}

TEST(ChildProcessTest, ExpectDropsTheLinesBeforeTheOneWithThePrefix) {
    auto child = start("echo");
    child->send("a");
    child->send("b");
    child->send("c");
    EXPECT_EQ(child->expect("ECHO b", 10s), "ECHO b");
    EXPECT_EQ(child->read_line(10s), "ECHO c");
}

TEST(ChildProcessTest, TheExtraEnvironmentReplacesTheParentsVariable) {
    ::setenv(kValueVariable, "parent", 1);
    ChildProcess child({"child-process-test"}, {{kRoleVariable, "env"}, {kValueVariable, "child"}});
    EXPECT_EQ(child.read_line(10s), "VALUE child");
    EXPECT_EQ(child.wait(), 0);
    ::unsetenv(kValueVariable);
}

TEST(ChildProcessTest, ASilentChildTimesOutWithNulloptInsteadOfHanging) {
    auto child = start("silent");
    const auto t0 = Clock::now();
    EXPECT_EQ(child->read_line(300ms), std::nullopt);
    EXPECT_EQ(child->expect("ANY", 300ms), std::nullopt);
    EXPECT_EQ(child->read_to_end(300ms), std::nullopt);
    const auto took = Clock::now() - t0;
    EXPECT_GE(took, 900ms);
    EXPECT_LT(took, 10s);
    EXPECT_EQ(child->wait_for(100ms), std::nullopt) << "it still runs";
}

TEST(ChildProcessTest, AChildThatExitedGivesEofAtOnceAndItsExitCode) {
    auto child = start("exit-7");
    const auto t0 = Clock::now();
    EXPECT_EQ(child->read_line(20s), std::nullopt);
    EXPECT_LT(Clock::now() - t0, 10s) << "EOF, not the timeout";
    EXPECT_EQ(child->wait(), 7);
    EXPECT_EQ(child->wait(), 7) << "the same again once reaped";
}

TEST(ChildProcessTest, SendingToAKilledChildThrowsInsteadOfRaisingSigpipe) {
    auto child = start("echo");
    child->signal(SIGKILL);
    EXPECT_EQ(child->wait(), 128 + SIGKILL);
    EXPECT_THROW(child->send("anyone there?"), lockstep::Error);
}

TEST(ChildProcessTest, TheDestructorKillsAndReapsAStoppedChild) {
    auto child = start("silent");
    const pid_t pid = child->pid();
    child->signal(SIGSTOP);
    child.reset();
    // Reaped: the pid names no process of ours any more (not even a zombie).
    EXPECT_EQ(::kill(pid, 0), -1);
    EXPECT_EQ(errno, ESRCH);
}

TEST(ChildProcessTest, AMissingExecutableIsATypedError) {
    EXPECT_THROW(ChildProcess({"nothing"}, {}, "/nonexistent/lockstep-no-such-program"), lockstep::Error);
}

}  // namespace
