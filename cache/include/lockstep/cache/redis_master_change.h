// What a master-change listener is told (RedisClient::add_master_change_listener): which keys
// may have lost writes because the master serving them was replaced (RACES L8).
//   Sentinel  the one master changed: every key.
//   Cluster   the slots whose master was replaced by another node (a failover, automatic or
//             CLUSTER FAILOVER): only keys hashing to those slots. A slot moved by resharding
//             (MIGRATE moves its keys, TTL included) is not a replaced master and is not listed.
#pragma once

#include <string_view>
#include <vector>

namespace lockstep {

struct RedisMasterChange {
    // true: every key (Sentinel). false: only the keys of `slots`.
    bool every_key = true;
    // Cluster: ascending slot numbers (0..16383) whose master was replaced.
    std::vector<int> slots;

    bool covers_slot(int slot) const noexcept;
    bool covers_key(std::string_view key) const noexcept;
};

}  // namespace lockstep
