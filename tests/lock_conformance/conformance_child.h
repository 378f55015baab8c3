// Child processes of the conformance suite: this test binary re-executed with
// LOCKSTEP_CONFORMANCE_CHILD naming a role (child_roles.cpp runs it before gtest's main; an empty
// role leaves the choice to another variable in `env`, as tests/coordination's roles do). The
// child talks to the parent in lines on stdin/stdout (lockstep::testing::ChildProcess).
//
// Thread safety: as ChildProcess: one Child is used by one thread at a time.
#pragma once

#include <map>
#include <string>

#include "lockstep/servers/child_process.h"

namespace lockstep::test {

class Child : public lockstep::testing::ChildProcess {
public:
    Child(const std::string& role, std::map<std::string, std::string> env)
        : ChildProcess({"conformance-child"}, with_role(role, std::move(env))) {}

private:
    static std::map<std::string, std::string> with_role(const std::string& role, std::map<std::string, std::string> env) {
        env["LOCKSTEP_CONFORMANCE_CHILD"] = role;
        return env;
    }
};

}  // namespace lockstep::test
