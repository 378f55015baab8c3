#include "lockstep/cache/redis_master_change.h"

#include <algorithm>

#include "lockstep/cache/redis_cluster_slot.h"

namespace lockstep {

bool RedisMasterChange::covers_slot(int slot) const noexcept {
    return every_key || std::binary_search(slots.begin(), slots.end(), slot);
}

bool RedisMasterChange::covers_key(std::string_view key) const noexcept {
    return every_key || covers_slot(redis_cluster_slot(key));
}

}  // namespace lockstep
