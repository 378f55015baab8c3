#include "renewal_scheduler.h"

#include <algorithm>
#include <utility>

namespace lockstep::locks_detail {

void RenewalScheduler::start(Pass pass) {
    pass_ = std::move(pass);
    MutexLock g(mu_);
    thread_ = std::thread([this] { run(); });
}

void RenewalScheduler::stop() {
    std::thread ending;
    {
        MutexLock g(mu_);
        stopping_ = true;
        ending = std::exchange(thread_, std::thread());  // one caller joins, even if two stop at once
    }
    wake_.notify_all();
    if (ending.joinable()) ending.join();
}

void RenewalScheduler::hold_added(SteadyTime due) {
    {
        MutexLock g(mu_);
        if (!planning_ && due >= planned_) return;  // the thread wakes before the hold is due and sees it then
        ++pokes_;
    }
    wake_.notify_one();
}

void RenewalScheduler::poke() {
    {
        MutexLock g(mu_);
        ++pokes_;
    }
    wake_.notify_one();
}

std::uint64_t RenewalScheduler::passes() const {
    MutexLock g(mu_);
    return passes_;
}

void RenewalScheduler::run() {
    MutexLock g(mu_);
    while (!stopping_) {
        const std::uint64_t seen = pokes_;
        planning_ = true;
        g.unlock();
        const SteadyTime due = pass_();
        const SteadyTime latest = SteadyClock::now() + max_sleep_;
        g.lock();
        ++passes_;
        planned_ = std::min(due, latest);
        planning_ = false;
        // A request made during the pass (pokes_ moved) runs another pass at once.
        while (!stopping_ && pokes_ == seen) {
            if (wake_.wait_until(mu_, planned_) == std::cv_status::timeout) break;
        }
    }
}

}  // namespace lockstep::locks_detail
