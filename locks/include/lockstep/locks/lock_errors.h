// Lock errors beyond the core tree (core/error.h has NotOwnerError and LockLostError).
#pragma once

#include "lockstep/core/error.h"

namespace lockstep {

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

}  // namespace lockstep
