// to_string(LockLossReason): the names every backend logs and reports a loss with. Its own file
// because lock_loss.h is the vocabulary of every backend, not of the Redis client alone.
#include "lockstep/locks/lock_loss.h"

namespace lockstep {

std::string_view to_string(LockLossReason r) noexcept {
    switch (r) {
        case LockLossReason::Expired:
            return "expired";
        case LockLossReason::Unreachable:
            return "unreachable";
        case LockLossReason::LeaseEnded:
            return "lease ended";
        case LockLossReason::FoundGone:
            return "found gone";
        case LockLossReason::ClientClosed:
            return "client closed";
        case LockLossReason::Failover:
            return "failover";
        case LockLossReason::MaxHoldReached:
            return "max hold reached";
    }
    return "unknown";
}

}  // namespace lockstep
