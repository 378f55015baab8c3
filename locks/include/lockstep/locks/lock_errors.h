// The errors of the lock layer, every backend's. Each is a lockstep::Error (core/error.h), so
// callers that only want recovery() need not name them.
#pragma once

#include "lockstep/core/error.h"

namespace lockstep {

// A lock was released (or renewed) by someone who does not hold it. Never a silent success.
class NotOwnerError : public Error {
public:
    using Error::Error;
};

// A lock this owner held has expired or been deleted under it (its lease ran out, the server
// restarted). Work done under it must be treated as unprotected.
class LockLostError : public Error {
public:
    using Error::Error;
    Recovery recovery() const noexcept override { return Recovery::RetryTransaction; }
};

// A thread holding the read side of a RedisReadWriteLock asked for the write side. Upgrading
// is refused instead of waiting: two readers both upgrading would wait for each other forever.
// Release the read side, then lock for writing (and re-check what was read).
class LockUpgradeError : public Error {
public:
    using Error::Error;
};

// The RedisLockClient behind this lock was destroyed. A waiter blocked in lock() when that happens
// wakes with this error; lock() afterwards gets it at once. Holds of a destroyed client were
// released and reported lost (LockLossReason::ClientClosed); their unlock() is a no-op.
class LockClientClosedError : public Error {
public:
    using Error::Error;
};

// RACES L8: a new acquisition that fewer replicas acknowledged (WAIT) than
// LockClientOptions::replication_wait asks for. The hold was released again before this was
// thrown: the caller holds nothing. The usual cause is a replica that is down or cut off from the
// master; retrying later may succeed (RetryCall), retrying at once usually does not.
class ReplicationWaitError : public Error {
public:
    using Error::Error;
    Recovery recovery() const noexcept override { return Recovery::RetryCall; }
};

}  // namespace lockstep
