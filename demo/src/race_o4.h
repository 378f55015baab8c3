// O4's other cases (race_o4_cases.cpp) run a node of the job in a process of its own, so that it
// can be SIGKILLed or SIGSTOPped: the demo binary re-executed with the hidden sub-command
// `__o4-holder` (race_o4_holder.cpp). The child runs one slot of a JobLock with a run record and
// talks over its stdin/stdout, one line at a time:
//   RECORD=first: the job records its run (and its effect) in an open transaction, says "RUNNING <slot> <token>",
//                 then waits for stdin to close (it is killed while it waits);
//   RECORD=last:  says "RUNNING <slot> <token>", waits for "COMMIT", then records and commits:
//                 answers "COMMITTED" or "REFUSED" (the run record's fence check).
// It says "SKIPPED <reason>" when it did not get the slot.
//
// Thread safety: a HolderProcess is used by one thread.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include <sys/types.h>

namespace lockstep {
class JobContext;
class Transaction;
}  // namespace lockstep

namespace lockstep::demo {

// The job's effect, in its transaction after record_run: one row of demo_o4_effects
// (job, slot, token). A run whose record is refused rolls it back.
void record_effect(Transaction& tx, const JobContext& run);

// The `__o4-holder` sub-command; its settings come from the environment (LSO4_*).
int o4_holder_main();

class HolderProcess {
public:
    // Starts the child with these LSO4_* settings (URL, PREFIX, JOB, PERIOD_MS, OFFSET_MS, MYSQL,
    // LEASE_MS, RECORD). Throws std::runtime_error when it cannot be started.
    explicit HolderProcess(const std::map<std::string, std::string>& settings);
    // Kills the child if it still runs, and reaps it.
    ~HolderProcess();
    HolderProcess(const HolderProcess&) = delete;
    HolderProcess& operator=(const HolderProcess&) = delete;

    // The child's next line, waiting up to `timeout`; nullopt when none came (or it exited).
    std::optional<std::string> next_line(std::chrono::milliseconds timeout);
    void send(const std::string& line);
    void signal(int sig);
    // Waits for the child to exit (after SIGKILL).
    void reap();

private:
    pid_t pid_ = -1;
    int to_child_ = -1;
    int from_child_ = -1;
    std::string buffer_;
};

}  // namespace lockstep::demo
