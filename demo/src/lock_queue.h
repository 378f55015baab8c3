// A queue of waiters on one lock, for the races about how waiters wait (docs/races.md L7, L9).
//
// One holder takes the lock; N waiters (workers: threads, or processes with --processes) try it,
// fail and go to sleep the way their lock makes them sleep, and each says so through Signals. Only
// when every waiter is asleep does the holder release; then every waiter gets the lock once, in
// turn, holding it `hold_ms`. Each waiter reports its acquire and release times (wall clock), its
// acquire attempts and its wake-ups, from which the run computes the hand-over latency (a release
// to the next acquisition), the Redis commands per acquisition and the wake-ups per release.
//
// The locks under test are named WaitingLock kinds: RedisMutex ("mutex", here) and the demo-only
// kinds of the race files (race_l7.cpp: a polling lock; race_l9.cpp: a herd lock).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "forced.h"
#include "signals.h"
#include "workers.h"

namespace lockstep::demo {

class DemoContext;

class WaitingLock {
public:
    virtual ~WaitingLock() = default;
    virtual void lock() = 0;
    virtual void unlock() = 0;
    // Acquire attempts sent to Redis (each a round trip), wake-ups (a sleep that ended for a
    // message or a poll timer), and other commands the lock sent (release, wake messages).
    virtual std::uint64_t attempts() const = 0;
    virtual std::uint64_t wakeups() const = 0;
    virtual std::uint64_t other_commands() const = 0;
};

struct WaitingLockArgs {
    Worker& w;
    std::string name;  // the lock's name (fresh per run)
    // Called by the lock each time it goes to sleep after a failed attempt.
    std::function<void()> on_sleep;
};

using WaitingLockFactory = std::function<std::unique_ptr<WaitingLock>(const WaitingLockArgs&)>;
// Kinds by name: "mutex" (RedisMutex), and those the race files add.
std::map<std::string, WaitingLockFactory>& waiting_locks();

struct QueueNumbers {
    int waiters = 0;
    double acquisitions = 0;
    double attempts_per_acquisition = 0;
    double wasted_attempts_per_acquisition = 0;  // attempts after a wake-up that found it held
    double wakeups_per_release = 0;              // releases that had a waiter
    double commands_per_acquisition = 0;         // attempts + other commands
    double handover_p50_ms = 0;
    double handover_max_ms = 0;
    Trial as_trial() const;  // metrics only
};

// Runs one queue of `waiters` on a fresh lock of `kind`; `sleeps_before_release`: how many times
// each waiter must have gone to sleep before the holder releases (more than 1 makes a polling
// lock show its polls even when one waiter waits alone).
QueueNumbers run_queue(DemoContext& ctx, const std::string& kind, int waiters, int sleeps_before_release, int hold_ms);

}  // namespace lockstep::demo
