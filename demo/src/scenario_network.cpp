// network (docs/races.md L11): a lock holder whose network fails while its process runs on. Its
// race case is race_l11.cpp; docs/locks.md states the validity contract it checks.
#include "scenarios.h"

namespace lockstep::demo {

void add_network() {
    add_scenario({"network",
                  "a holder cut off from its lock server past its lease, on every backend: a validity that waits for "
                  "the server's word lets two holders believe at once; lost() on the holder's own clock does not",
                  {}});
}

}  // namespace lockstep::demo
