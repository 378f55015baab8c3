#include "hold_timer.h"

#include <algorithm>
#include <utility>

namespace lockstep::locks_detail {

void HoldTimer::start(Pass pass) {
    pass_ = std::move(pass);
    MutexLock g(mu_);
    thread_ = std::thread([this] { run(); });
}

void HoldTimer::start_lazily(Pass pass) {
    pass_ = std::move(pass);
    MutexLock g(mu_);
    lazy_ = true;
}

bool HoldTimer::start_if_lazy() {
    if (!lazy_ || stopping_) return false;
    lazy_ = false;
    thread_ = std::thread([this] { run(); });
    return true;
}

void HoldTimer::stop() {
    std::thread ending;
    {
        MutexLock g(mu_);
        stopping_ = true;
        ending = std::exchange(thread_, std::thread());  // one caller joins, even if two stop at once
    }
    wake_.notify_all();
    if (ending.joinable()) ending.join();
}

void HoldTimer::hold_added(SteadyTime due) {
    if (due == SteadyTime::max()) return;
    {
        MutexLock g(mu_);
        if (start_if_lazy()) return;
        if (!planning_ && due >= planned_) return;  // the thread wakes before the hold is due and sees it then
        ++pokes_;
    }
    wake_.notify_one();
}

void HoldTimer::poke() {
    {
        MutexLock g(mu_);
        if (start_if_lazy()) return;
        ++pokes_;
    }
    wake_.notify_one();
}

std::uint64_t HoldTimer::passes() const {
    MutexLock g(mu_);
    return passes_;
}

void HoldTimer::run() {
    MutexLock g(mu_);
    while (!stopping_) {
        const std::uint64_t seen = pokes_;
        planning_ = true;
        g.unlock();
        const SteadyTime due = pass_();
        const SteadyTime latest =
            max_sleep_ == kNoMaxSleep ? SteadyTime::max() : SteadyClock::now() + max_sleep_;
        g.lock();
        ++passes_;
        planned_ = std::min(due, latest);
        planning_ = false;
        // A request made during the pass (pokes_ moved) runs another pass at once.
        while (!stopping_ && pokes_ == seen) {
            if (planned_ == SteadyTime::max()) {
                wake_.wait(mu_);
            } else if (wake_.wait_until(mu_, planned_) == std::cv_status::timeout) {
                break;
            }
        }
    }
}

}  // namespace lockstep::locks_detail
