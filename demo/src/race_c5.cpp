// C5 (docs/races.md): the writer committed, its cache step did not happen.
//   The cache holds v1; W commits v2 and then its cache step fails: Redis times out (the
//   repository's retry queue must fix it), or W's process dies right after COMMIT (nothing in the
//   process can: the retry queue dies with it; only a delete before COMMIT or the TTL bound help).
#include "stale_cache.h"

namespace lockstep::demo {

namespace {

using namespace stale;

const char* const kTimeout = ", Redis timeout on the cache step";
const char* const kCrash = ", writer dies after COMMIT";

char expected_crash(const std::string& strategy) {
    if (strategy == "DelayedDoubleDelete" || strategy == "DeleteThenCommit") return 'F';
    if (strategy == "TtlBounding") return 'B';
    return 'S';
}

void forced(DemoContext& ctx, const RaceCase& c) {
    const int runs = ctx.options().repeat;
    ctx.progress(std::string(kScenario) + ": forced C5 (a Redis timeout, a writer crash), every strategy" +
                 (runs > 1 ? " (x" + std::to_string(runs) + " each)" : ""));
    for (const std::string variant : {"timeout", "crash"}) {
        for (const auto& s : strategy_infos()) {
            auto base = ctx.row(c, label(s.name, "None") + (variant == "crash" ? kCrash : kTimeout), Mode::Forced);
            if (!base) continue;
            record_forced(
                ctx, std::move(*base),
                [&](int) {
                    ForcedRun run = run_actors(ctx, c, s.name, "None", variant, Setup{true, 10});
                    std::string what;
                    if (variant == "crash") {
                        what = "writer died after COMMIT; ";
                    } else if (run.results[0].value("cache_step_failures", 0) == 0) {
                        what = "no cache step after COMMIT to time out (it deleted before); ";
                    } else {
                        const long long retried = sum_metric(run, "deletes_retried");
                        what = "cache step after COMMIT timed out, " + std::to_string(retried) + " background retr" +
                               (retried == 1 ? "y" : "ies") + "; ";
                    }
                    return judge_freshness(ctx, run, what);
                },
                false);
        }
    }
}

}  // namespace

void add_race_c5() {
    add_actor_role(
        "C5",
        [](ActorEnv& e) {
            if (e.variant == "crash") {
                // The writer's process dies right after COMMIT: its cache step and its retry queue
                // die with it.
                Worker& w = e.w;
                ThreadFault die(std::string(repo_points::after_commit), [&w] { w.crash(); });
                e.set_price(200);
            } else {
                FlakyStore* flaky = e.flaky;
                ThreadFault timeout(std::string(repo_points::after_commit), [flaky] { flaky->arm(); });
                e.set_price(200);
            }
            e.out["cache_step_failures"] = e.flaky->failed();
        },
        true);
    RaceCase c{kScenario, "C5",
               "the cache holds v1; W commits v2, then its cache step times out, or its process dies right after COMMIT",
               {"W: commits v2; at repo.after_commit the next cache step fails, or the process exits"},
               "",
               {},
               forced,
               {}};
    for (const auto& s : strategy_infos()) c.rows.push_back({label(s.name, "None") + kTimeout, Mode::Forced, Outcome::Prevented});
    for (const auto& s : strategy_infos()) {
        c.rows.push_back({label(s.name, "None") + kCrash, Mode::Forced, as_outcome(expected_crash(s.name))});
    }
    add_race(std::move(c));
}

}  // namespace lockstep::demo
