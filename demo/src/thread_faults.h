// ThreadFault: arms a lockstep fault point (core/fault_point.h) for the calling thread only.
//
// The core keeps one acting arming per point name (the newest), so two actors of one process
// that each armed the same point would shadow each other. Here each point is armed once per
// process with an action that looks up the thread that reached it, so any number of actor
// threads may each have their own action at the same point at the same time.
//
// Thread safety: any thread may create and destroy ThreadFaults.
#pragma once

#include <string>

#include "lockstep/core/fault_point.h"

namespace lockstep::demo {

class ThreadFault {
public:
    // Runs `action` the next `times` times (-1: every time) the calling thread reaches `point`.
    ThreadFault(std::string point, fault::Action action, int times = 1);
    ~ThreadFault();
    ThreadFault(const ThreadFault&) = delete;
    ThreadFault& operator=(const ThreadFault&) = delete;

    // How often the action ran.
    int acted() const;

private:
    std::string point_;
    long id_;
};

}  // namespace lockstep::demo
