#include "lockstep/coordination/job_runner.h"

#include <random>

#include "lockstep/core/logging.h"

namespace lockstep {

JobRunner::JobRunner(JobLock& lock, std::function<void(JobContext&)> job, JobRunnerOptions options)
    : lock_(lock), job_(std::move(job)), options_(options) {
    thread_ = std::thread([this] { loop(); });
}

JobRunner::~JobRunner() { stop(); }

void JobRunner::stop() {
    {
        MutexLock g(mu_);
        stopping_ = true;
        changed_.notify_all();
    }
    lock_.request_stop();
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

JobRunnerCounts JobRunner::counts() const {
    MutexLock g(mu_);
    return counts_;
}

bool JobRunner::sleep_until(std::chrono::steady_clock::time_point t) {
    MutexLock g(mu_);
    while (!stopping_ && std::chrono::steady_clock::now() < t) changed_.wait_until(mu_, t);
    return !stopping_;
}

void JobRunner::count(const JobRun& run) {
    MutexLock g(mu_);
    ++counts_.slots;
    switch (run.outcome) {
    case JobOutcome::Skipped: ++counts_.skipped; break;
    case JobOutcome::Ran: ++counts_.ran; break;
    case JobOutcome::Failed: ++counts_.failed; break;
    case JobOutcome::Overran: ++counts_.overran; break;
    case JobOutcome::Lost: ++counts_.lost; break;
    }
}

void JobRunner::loop() {
    std::mt19937_64 rng(std::random_device{}());
    std::uniform_int_distribution<long long> jitter(0, std::max<long long>(0, options_.jitter.count()));
    for (;;) {
        {
            MutexLock g(mu_);
            if (stopping_) return;
        }
        std::chrono::steady_clock::time_point next;
        try {
            const JobRun run = lock_.run_once(job_);
            count(run);
            logger()->info("job {} slot {}: {}{}{} (token {}, local clock {} ms from the server's)", lock_.job(),
                           run.slot.index, to_string(run.outcome), run.skip_reason.empty() ? "" : ": ", run.skip_reason,
                           run.token, run.local_clock_offset.count());
            if (run.error) {
                try {
                    std::rethrow_exception(run.error);
                } catch (const std::exception& e) {
                    logger()->warn("job {} slot {} threw: {}", lock_.job(), run.slot.index, e.what());
                } catch (...) {
                    logger()->warn("job {} slot {} threw a non-standard exception", lock_.job(), run.slot.index);
                }
            }
            // The next slot starts where this one ends, in server time.
            const auto server_now = lock_.service().server_time();
            const auto steady_now = std::chrono::steady_clock::now();
            next = steady_now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(run.slot.end - server_now);
        } catch (const std::exception& e) {
            {
                MutexLock g(mu_);
                ++counts_.slots;
                ++counts_.failed;
            }
            logger()->warn("job {}: could not run a slot: {}", lock_.job(), e.what());
            next = std::chrono::steady_clock::now() + options_.error_backoff;
        }
        if (!sleep_until(next + std::chrono::milliseconds(jitter(rng)))) return;
    }
}

}  // namespace lockstep
