// C4 (docs/races.md): as C2, but the reader is slower than the delayed second delete.
//   R misses and reads v1, stops before its backfill; W commits v2, does its cache step and waits
//   for its background deletes (the delayed one); then R goes on and writes v1 back.
#include "stale_cache.h"

namespace lockstep::demo {

void add_race_c4() {
    using namespace stale;
    add_actor_role("C4", [](ActorEnv& e) {
        if (e.actor == "R") {
            ThreadFault stop(std::string(repo_points::after_db_read), e.a.stop_at("r_at", "r_go"));
            auto v = e.repo.get_versioned(e.a.id);
            e.out["read_version"] = v ? v->version : 0;
        } else {
            e.a.await("r_at");
            run_then_release(e.a, e.repo, "r_go", [&] { e.set_price(200); }, [&] { e.settle(); });
        }
    });
    // The delayed delete removes a backfill that lands before it (C2), not one that lands after it.
    add_matrix_race("C4",
                    "as C2, but R goes on only after W's background deletes (the delayed one) have run",
                    {"R: misses, reads v1, stops at repo.after_db_read, backfills when let go",
                     "W: commits v2, does its cache step, waits for its delayed delete, lets R go"},
                    Setup{},
                    {{"WriteThenDelete", 'S'}, {"DelayedDoubleDelete", 'S'}, {"TtlBounding", 'B'}, {"WriteThrough", 'F'},
                     {"Lease", 'F'}, {"DeleteThenCommit", 'S'}, {"WriteThenSet", 'S'}});
}

}  // namespace lockstep::demo
