#include "job_hold_keeper.h"

#include <algorithm>
#include <thread>

namespace lockstep::coordination_detail {

JobHoldKeeper& JobHoldKeeper::instance() {
    // Never destroyed: a JobLock destroyed during static destruction still finds it.
    static JobHoldKeeper* keeper = new JobHoldKeeper();
    return *keeper;
}

JobHoldKeeper::JobHoldKeeper() { std::thread([this] { run(); }).detach(); }

void JobHoldKeeper::plan(SteadyTime due) {
    if (passing_) {
        earliest_added_ = std::min(earliest_added_, due);
        return;
    }
    if (due < planned_) {
        planned_ = due;
        wake_.notify_one();
    }
}

void JobHoldKeeper::watch(std::shared_ptr<KeptHold> hold, SteadyTime due) {
    MutexLock g(mu_);
    holds_.push_back(std::move(hold));
    plan(due);
}

void JobHoldKeeper::due_at(SteadyTime due) {
    MutexLock g(mu_);
    plan(due);
}

void JobHoldKeeper::forget(const KeptHold* hold) {
    MutexLock g(mu_);
    std::erase_if(holds_, [&](const std::shared_ptr<KeptHold>& h) { return h.get() == hold; });
}

void JobHoldKeeper::poke() {
    MutexLock g(mu_);
    poked_ = true;
    wake_.notify_one();
}

void JobHoldKeeper::run() {
    MutexLock g(mu_);
    for (;;) {
        while (!poked_ && std::chrono::steady_clock::now() < planned_) {
            if (planned_ == SteadyTime::max()) {
                wake_.wait(mu_);
            } else {
                wake_.wait_until(mu_, planned_);
            }
        }
        poked_ = false;
        passing_ = true;
        earliest_added_ = SteadyTime::max();
        std::vector<std::shared_ptr<KeptHold>> pass = holds_;
        g.unlock();
        const SteadyTime now = std::chrono::steady_clock::now();
        SteadyTime next = SteadyTime::max();
        std::vector<KeptHold*> ended;
        for (const auto& h : pass) {
            const SteadyTime due = h->check(now);
            if (due == SteadyTime::max()) {
                ended.push_back(h.get());
            } else {
                next = std::min(next, due);
            }
        }
        pass.clear();
        g.lock();
        std::erase_if(holds_, [&](const std::shared_ptr<KeptHold>& h) {
            return std::find(ended.begin(), ended.end(), h.get()) != ended.end();
        });
        passing_ = false;
        planned_ = std::min(next, earliest_added_);
    }
}

}  // namespace lockstep::coordination_detail
