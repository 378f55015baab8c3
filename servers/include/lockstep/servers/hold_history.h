// HoldHistory: a record of lock holds taken by many threads and processes, and the checker that
// says whether they were allowed: no instant at which two holders of one name both believed
// they held it, and fencing tokens that grow with the order of acquisition (RACES L5, L8, L11).
//
//   lockstep::HoldHistory history;
//   // in each holder thread:
//   m->lock();
//   auto h = history.begin("job", "node-a", m->fence_token());      // believes from now
//   while (working) { if (m->lost()) break; h.believed(); ... }     // each "still mine"
//   history.end(std::move(h));                                      // before unlock()
//   ...
//   for (const auto& a : history.check()) ADD_FAILURE() << a.describe();
//
// Times are CLOCK_MONOTONIC microseconds (std::chrono::steady_clock on Linux), comparable across
// the processes of one machine; a child process sends its records to its parent as
// HoldRecord::to_line() lines. Every time is taken on the conservative side, so that the checker
// never reports an overlap that did not happen: a belief starts when the acquisition returned
// (the server granted it earlier) and ends at the last time taken *before* a lost() that said
// false or before unlock() was called (the holder believed a little longer).
//
// Thread safety: begin/end/add/check may be called from any thread; a Belief from its own.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace lockstep {

std::int64_t monotonic_us();

struct HoldRecord {
    std::string name;    // the lock name
    std::string holder;  // who held it: "<process>/<thread>" or any unique label
    std::int64_t token = 0;
    std::int64_t acquired_us = 0;        // the acquisition returned
    std::int64_t believed_until_us = 0;  // the last instant the holder is known to have believed

    // "hold <name> <holder> <token> <acquired_us> <believed_until_us>" (name and holder without spaces).
    std::string to_line() const;
    static std::optional<HoldRecord> from_line(const std::string& line);
};

struct HoldAnomaly {
    enum class Kind {
        TwoBelievers,       // `second` was acquired while `first` still believed it held the name
        TokenNotIncreasing  // `second` was acquired after `first` had ended, with a token not above it
    };
    Kind kind;
    HoldRecord first, second;
    // The minimal history that shows it: the two holds, times relative to the first acquisition.
    std::string describe() const;
};

class HoldHistory {
public:
    class Belief {
    public:
        // The holder still believes, as of now (call it before each lost() check that says false).
        void believed() { record_.believed_until_us = monotonic_us(); }
        const HoldRecord& record() const { return record_; }

    private:
        friend class HoldHistory;
        HoldRecord record_;
    };

    Belief begin(std::string name, std::string holder, std::int64_t token);
    // Records the hold; call it before unlock() (or at the last belief of a hold that was lost).
    void end(Belief belief);
    void add(HoldRecord record);
    std::vector<HoldRecord> records() const;
    std::vector<HoldAnomaly> check() const;

private:
    mutable std::mutex mu_;
    std::vector<HoldRecord> records_;
};

// The checker alone, on records from anywhere: anomalies in order of acquisition.
std::vector<HoldAnomaly> check_holds(std::vector<HoldRecord> records);

}  // namespace lockstep
