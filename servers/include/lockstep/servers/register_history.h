// RegisterHistory: a record of reads and writes of one key by many clients, and a linearizability
// checker for it (Wing & Gong's search with Lowe's memoisation, as Knossos and Porcupine do): is
// there one order of the operations, each placed between its invocation and its completion, in
// which every read returns the value of the last write before it?
//
//   lockstep::RegisterHistory history(0);                 // the key's value before the run
//   auto op = history.invoke_write(client, 7);  repo.update(...);  history.complete(op);
//   auto rd = history.invoke_read(client);      auto v = repo.get(...);  history.complete(rd, v);
//   auto r = history.check();
//   if (!r.linearizable) ADD_FAILURE() << r.explanation;  // the smallest failing sub-history
//
// An operation that never completed (its client crashed, or gave up on a timeout) may have taken
// effect at any time after its invocation, or never: leave it incomplete. Values are integers
// (a version or a counter); reads of "nothing" use a value the test reserves.
//
// Meant for short histories (up to a few hundred operations, a handful of clients): the search
// is exponential in the number of operations that overlap at once. check() gives up with
// `gave_up` after `max_states` explored states, never hangs.
//
// Thread safety: invoke/complete from any thread; check() after the clients are done.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace lockstep {

struct RegisterOp {
    enum class Kind { Read, Write };
    int client = 0;
    Kind kind = Kind::Read;
    std::int64_t value = 0;              // written, or read (when complete)
    std::int64_t invoke_us = 0;          // monotonic_us() (hold_history.h)
    std::optional<std::int64_t> complete_us;  // nullopt: never completed
};

struct RegisterCheck {
    bool linearizable = true;
    bool gave_up = false;          // too many states: no verdict
    std::size_t states = 0;        // states explored by the full check
    std::vector<RegisterOp> minimal;  // not linearizable: a smallest failing sub-history (greedy)
    std::string explanation;       // the minimal history, one operation per line
};

// The checker alone, on operations from anywhere. `initial`: the value before the first write.
RegisterCheck check_register(const std::vector<RegisterOp>& ops, std::int64_t initial,
                             std::size_t max_states = 2'000'000);

class RegisterHistory {
public:
    explicit RegisterHistory(std::int64_t initial) : initial_(initial) {}
    std::size_t invoke_write(int client, std::int64_t value);
    std::size_t invoke_read(int client);
    void complete(std::size_t op);                      // a write
    void complete(std::size_t op, std::int64_t value);  // a read, with what it returned
    std::vector<RegisterOp> ops() const;
    RegisterCheck check(std::size_t max_states = 2'000'000) const;

private:
    std::int64_t initial_;
    mutable std::mutex mu_;
    std::vector<RegisterOp> ops_;
};

}  // namespace lockstep
