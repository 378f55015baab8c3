// InMemoryLockService: the LockService of one process, with no server (leveldb's memenv): for
// fast unit tests of code that takes locks, and as the reference the conformance suite holds
// every other backend to. Locks of two InMemoryLockService objects are independent (as two
// Redis servers would be); threads of one service exclude each other as processes would.
//
// Holds never run out on their own; expire(name) takes every hold of a name away as if its
// lease had run out, so tests can force a loss (L5) at a known step.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "lockstep/locks/lock_service.h"

namespace lockstep {

class InMemoryLockService : public LockService {
public:
    explicit InMemoryLockService(LockServiceOptions options = {});
    ~InMemoryLockService() override;

    std::unique_ptr<DistributedMutex> make_mutex(std::string name, LockOptions options = {}) override;
    std::unique_ptr<DistributedReadWriteLock> make_read_write_lock(std::string name, LockOptions options = {}) override;
    std::string_view backend() const noexcept override { return "memory"; }
    // This process's system clock: every lock of the service lives in this process.
    std::chrono::system_clock::time_point server_time() override { return std::chrono::system_clock::now(); }

    // Every hold of `name` (mutex and read-write) is lost now, as if its lease ran out: lost()
    // turns true, on_lost runs, others may acquire; the holder's unlock throws LockLostError.
    void expire(const std::string& name);
    // Threads waiting now in lock() / try_lock_for() of any lock (for tests).
    int waiting() const;

    struct State;

private:
    std::shared_ptr<State> state_;
};

}  // namespace lockstep
