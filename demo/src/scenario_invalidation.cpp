// invalidation (docs/races.md C9, C10): writes the library's own write path cannot invalidate by
// itself: another service's UPDATE (C9) and a replica that has not applied a write yet (C10).
// Their race cases are race_c9.cpp and race_c10.cpp; docs/invalidation.md describes the layer.
#include "scenarios.h"

namespace lockstep::demo {

void add_invalidation() {
    add_scenario({"invalidation",
                  "writes no library code deletes: another service's UPDATE stays cached until TTL unless a binlog "
                  "follower deletes its key; a miss read from a lagging replica caches the old row unless the key's "
                  "recent write sends it to the primary",
                  {}});
}

}  // namespace lockstep::demo
