#include "lockstep/strategies/background_scheduler.h"

#include <map>
#include <thread>

#include "lockstep/core/logging.h"
#include "lockstep/core/mutex.h"

namespace lockstep {

struct BackgroundScheduler::State {
    using Clock = std::chrono::steady_clock;

    Mutex mutex;
    CondVar wake;  // the worker: a new task or stop
    CondVar idle;  // wait_idle callers
    // Due time -> task; multimap keeps insertion order among equal due times.
    std::multimap<Clock::time_point, std::function<void()>> tasks GUARDED_BY(mutex);
    bool running_task GUARDED_BY(mutex) = false;
    bool stop GUARDED_BY(mutex) = false;
    std::thread worker;

    // The worker thread. Runs each task with the mutex released.
    void run() EXCLUDES(mutex) {
        MutexLock lock(mutex);
        while (!stop) {
            if (tasks.empty()) {
                idle.notify_all();
                wake.wait(mutex);
                continue;
            }
            auto due = tasks.begin()->first;
            if (Clock::now() < due) {
                wake.wait_until(mutex, due);
                continue;
            }
            auto task = std::move(tasks.begin()->second);
            tasks.erase(tasks.begin());
            running_task = true;
            lock.unlock();
            try {
                task();
            } catch (const std::exception& e) {
                logger()->error("background task failed: {}", e.what());
            } catch (...) {
                logger()->error("background task failed with a non-standard exception");
            }
            lock.lock();
            running_task = false;
            if (tasks.empty()) idle.notify_all();
        }
    }
};

BackgroundScheduler::BackgroundScheduler() : state_(std::make_shared<State>()) {
    state_->worker = std::thread([s = state_.get()] { s->run(); });
}

BackgroundScheduler::~BackgroundScheduler() {
    std::size_t dropped = 0;
    {
        MutexLock lock(state_->mutex);
        state_->stop = true;
        dropped = state_->tasks.size();
    }
    state_->wake.notify_all();
    state_->worker.join();
    if (dropped > 0) logger()->warn("background scheduler stopped with {} task(s) not run", dropped);
}

// The worker is woken only when the new task is due before every queued one: otherwise it
// already sleeps until an earlier due time and will see this task then. A stream of writes
// with a DelayedDoubleDelete schedules one task per write; waking the worker for each cost the
// writer a context switch on a busy machine (the double-delete writer row).
void BackgroundScheduler::run_after(std::chrono::milliseconds delay, std::function<void()> task) {
    bool earliest = false;
    {
        MutexLock lock(state_->mutex);
        const auto due = State::Clock::now() + delay;
        earliest = state_->tasks.empty() || due < state_->tasks.begin()->first;
        state_->tasks.emplace(due, std::move(task));
    }
    if (earliest) state_->wake.notify_all();
}

bool BackgroundScheduler::wait_idle(std::chrono::milliseconds timeout) const {
    const auto deadline = State::Clock::now() + timeout;
    MutexLock lock(state_->mutex);
    while (!state_->tasks.empty() || state_->running_task) {
        if (state_->idle.wait_until(state_->mutex, deadline) == std::cv_status::timeout) {
            return state_->tasks.empty() && !state_->running_task;
        }
    }
    return true;
}

std::size_t BackgroundScheduler::pending() const {
    MutexLock lock(state_->mutex);
    return state_->tasks.size();
}

}  // namespace lockstep
