// C1 (docs/races.md): two writers' cache steps land in the opposite order of their commits.
//   W1 commits v2 and stops before its cache step; W2 commits v3 and does its cache step; W1
//   goes on. A strategy that writes the value (WriteThenSet) leaves W1's older v2 behind.
#include "stale_cache.h"

namespace lockstep::demo {

void add_race_c1() {
    using namespace stale;
    add_actor_role("C1", [](ActorEnv& e) {
        if (e.actor == "W1") {
            ThreadFault stop(std::string(repo_points::after_commit), e.a.stop_at("w1_at", "w1_go"));
            e.set_price(200);
        } else {
            e.a.await("w1_at");
            run_then_release(e.a, e.repo, "w1_go", [&] { e.set_price(300); });
        }
    });
    add_matrix_race("C1", "W1 commits v2 and stops before its cache step; W2 commits v3 and does its cache step",
                    {"W1: commits v2, stops at repo.after_commit", "W2: commits v3, does its cache step, lets W1 go"},
                    Setup{},
                    {{"WriteThenDelete", 'F'}, {"DelayedDoubleDelete", 'F'}, {"TtlBounding", 'F'}, {"WriteThrough", 'F'},
                     {"Lease", 'F'}, {"DeleteThenCommit", 'F'}, {"WriteThenSet", 'S'}});
}

}  // namespace lockstep::demo
