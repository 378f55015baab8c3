// C3 (docs/races.md): a read between the writer's delete and its COMMIT backfills the old value.
//   The cache holds v1; W stops just before COMMIT (after any delete it does first); R reads and
//   backfills if it missed; W commits and does its cache step.
#include "stale_cache.h"

namespace lockstep::demo {

void add_race_c3() {
    using namespace stale;
    add_actor_role("C3", [](ActorEnv& e) {
        if (e.actor == "W") {
            ThreadFault stop(std::string(repo_points::before_commit), e.a.stop_at("w_at", "w_go"));
            e.set_price(200);
        } else {
            e.a.await("w_at");
            run_then_release(e.a, e.repo, "w_go", [&] {
                auto v = e.repo.get_versioned(e.a.id);
                e.out["read_version"] = v ? v->version : 0;
            });
        }
    });
    add_matrix_race("C3", "the cache holds v1; W stops just before COMMIT; R reads (and backfills if it missed)",
                    {"W: does any delete-before, stops at repo.before_commit, commits v2 when let go",
                     "R: reads, backfills if it missed, lets W go"},
                    Setup{true, 10},
                    {{"WriteThenDelete", 'F'}, {"DelayedDoubleDelete", 'F'}, {"TtlBounding", 'F'}, {"WriteThrough", 'F'},
                     {"Lease", 'F'}, {"DeleteThenCommit", 'S'}, {"WriteThenSet", 'F'}});
}

}  // namespace lockstep::demo
