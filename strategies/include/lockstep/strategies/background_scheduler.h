// BackgroundScheduler: one thread that runs tasks at their due time (a timed task queue). The
// repository uses it for delayed deletes (DelayedDoubleDelete) and for retrying deletes that
// failed, so that no caller ever sleeps for either. Repositories may share one.
//
// Tasks run one at a time, in due-time order; a task must not block for long (a delete is one
// round trip bounded by the Redis socket timeout). An exception escaping a task is logged and
// the thread goes on.
//
// Thread safety: every member may be called from any thread, including from inside a task.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>

namespace lockstep {

class BackgroundScheduler {
public:
    BackgroundScheduler();
    // Stops the thread. Tasks not yet run are dropped; how many is logged (warn) if any.
    ~BackgroundScheduler();
    BackgroundScheduler(const BackgroundScheduler&) = delete;
    BackgroundScheduler& operator=(const BackgroundScheduler&) = delete;

    // Runs `task` on the scheduler thread once `delay` has passed (0: as soon as possible).
    void run_after(std::chrono::milliseconds delay, std::function<void()> task);

    // Blocks until no task is queued or running (tasks scheduled meanwhile, e.g. a retry that
    // reschedules itself, count too). False if `timeout` passed first.
    bool wait_idle(std::chrono::milliseconds timeout) const;

    // Tasks queued and not yet started.
    std::size_t pending() const;

private:
    struct State;
    std::shared_ptr<State> state_;
};

}  // namespace lockstep
