// Child processes of the conformance suite: this test binary re-executed with
// LOCKSTEP_CONFORMANCE_CHILD naming a role (child_roles.cpp runs it before gtest's main).
// The child talks to the parent in lines on stdin/stdout.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>

namespace lockstep::test {

class Child {
public:
    Child(const std::string& role, const std::map<std::string, std::string>& env);
    ~Child();  // SIGKILLs it if still running, and reaps it
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;

    // Reads lines until one starts with `prefix`; returns it (nullopt on timeout / EOF).
    std::optional<std::string> expect(const std::string& prefix, std::chrono::milliseconds timeout);
    void send(const std::string& line);
    void signal(int sig);
    int wait();  // exit code, or 128 + signal
    pid_t pid() const { return pid_; }

private:
    std::optional<std::string> read_line(std::chrono::milliseconds timeout);
    pid_t pid_ = -1;
    int in_ = -1;
    int out_ = -1;
    std::string buffer_;
    bool reaped_ = false;
    int status_ = 0;
};

}  // namespace lockstep::test
