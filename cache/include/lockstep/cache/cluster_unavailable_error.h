// ClusterUnavailableError: a Redis Cluster (or a Sentinel-guarded master) could not serve a
// command within RedisOptions::failover_wait: the cluster said CLUSTERDOWN or TRYAGAIN, or the
// master of the key's slot stayed unreachable (a failover not finished yet). The command was
// not applied (those replies and refused connections mean it never ran), so the call may be
// repeated: RetryCall, like every ConnectionError.
#pragma once

#include "lockstep/core/error.h"

namespace lockstep {

class ClusterUnavailableError : public ConnectionError {
public:
    using ConnectionError::ConnectionError;
};

}  // namespace lockstep
