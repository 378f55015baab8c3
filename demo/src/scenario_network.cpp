// network (docs/races.md L11, L12): a lock holder whose network fails while its process runs on
// (race_l11.cpp; docs/locks.md states the validity contract it checks), and a fair lock's grant
// slower than its lease (race_l12.cpp).
#include "scenarios.h"

namespace lockstep::demo {

void add_network() {
    add_scenario({"network",
                  "a holder cut off from its lock server past its lease, on every backend: a validity that waits for "
                  "the server's word lets two holders believe at once; lost() on the holder's own clock does not; a grant "
                  "slower than its lease, counted from its arrival, lets a waiter believe beside a thief",
                  {}});
}

}  // namespace lockstep::demo
