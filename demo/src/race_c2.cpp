// C2 (docs/races.md): a reader's backfill of the old value lands after the writer's delete.
//   R misses and reads v1, stops before its backfill; W commits v2 and does its cache step; R goes
//   on as soon as W returned and writes v1 back.
#include "stale_cache.h"

namespace lockstep::demo {

void add_race_c2() {
    using namespace stale;
    add_actor_role("C2", [](ActorEnv& e) {
        if (e.actor == "R") {
            ThreadFault stop(std::string(repo_points::after_db_read), e.a.stop_at("r_at", "r_go"));
            auto v = e.repo.get_versioned(e.a.id);
            e.out["read_version"] = v ? v->version : 0;
        } else {
            e.a.await("r_at");
            run_then_release(e.a, e.repo, "r_go", [&] { e.set_price(200); });
        }
    });
    add_matrix_race("C2", "R misses and reads v1, stops before its backfill; W commits v2 and does its cache step",
                    {"R: misses, reads v1, stops at repo.after_db_read, backfills when let go",
                     "W: commits v2, does its cache step, lets R go"},
                    Setup{},
                    {{"WriteThenDelete", 'S'}, {"DelayedDoubleDelete", 'F'}, {"TtlBounding", 'B'}, {"WriteThrough", 'F'},
                     {"Lease", 'F'}, {"DeleteThenCommit", 'S'}, {"WriteThenSet", 'S'}});
}

}  // namespace lockstep::demo
