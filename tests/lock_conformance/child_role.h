// What a child role of a test binary uses (the binary re-executed by conformance_child.h's Child):
// its environment, lines to its parent on stdout, and the runner that claims the process when an
// environment variable names the role, before gtest's main runs.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

namespace lockstep::test::child {

// The variable's value; "" when unset.
inline std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

// One line to the parent, written at once (no buffering a kill could lose).
inline void say(const std::string& line) {
    const std::string l = line + "\n";
    (void)!::write(STDOUT_FILENO, l.data(), l.size());
}

// When `selector` names `role_name`: runs `role` and exits with its status (4 and an ERROR line
// when it throws). Otherwise returns, and the process goes on to the tests.
inline void run_if_named(const char* selector, const char* role_name, int (*role)()) {
    if (env(selector) != role_name) return;
    int rc = 4;
    try {
        rc = role();
    } catch (const std::exception& e) {
        say(std::string("ERROR ") + e.what());
    }
    std::cout.flush();
    ::_exit(rc);
}

}  // namespace lockstep::test::child
