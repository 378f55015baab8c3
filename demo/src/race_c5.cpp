// C5 (docs/races.md): the writer committed, its cache step did not happen.
//   The cache holds v1; W commits v2 and then its cache step fails: Redis times out (the
//   repository's retry queue must fix it), or W's process dies right after COMMIT (nothing in the
//   process can: the retry queue dies with it; only a delete before COMMIT or the TTL bound help).
//   Outside the process, two things close the crash for every strategy it leaves stale: the
//   outbox (the write's row, committed with it, is replayed by a live peer after its bound) and a
//   binlog follower (the committed change deletes the key). Those rows measure how long the entry
//   stayed stale after the writer died.
#include <chrono>
#include <memory>
#include <thread>

#include "demo_follower.h"
#include "stale_cache.h"
#include "stats.h"

namespace lockstep::demo {

namespace {

using namespace stale;
using Clock = std::chrono::steady_clock;

const char* const kTimeout = ", Redis timeout on the cache step";
const char* const kCrash = ", writer dies after COMMIT";
const char* const kCrashOutbox = ", writer dies after COMMIT + outbox";
const char* const kCrashFollower = ", writer dies after COMMIT + binlog follower";
// How long a closed row waits for the entry to turn fresh: well past the outbox's bound plus a
// replay round, and any follower lag seen on a loaded machine.
constexpr auto kFreshWithin = std::chrono::seconds(5);

char expected_crash(const std::string& strategy) {
    if (strategy == "DelayedDoubleDelete" || strategy == "DeleteThenCommit") return 'F';
    if (strategy == "TtlBounding") return 'B';
    return 'S';
}

// The strategies whose crash rows end stale, and that a service can use (not demo-only).
bool closable_by_outside(const StrategyInfo& s) { return !s.demo_only && expected_crash(s.name) != 'F'; }

// After the writer died: polls until the entry is fresh (or kFreshWithin passes) and says how
// long that took.
Trial judge_after_crash(DemoContext& ctx, const ForcedRun& run, const std::string& closer) {
    const auto died = Clock::now();
    Trial t = judge_freshness(ctx, run);
    while (t.reproduced && Clock::now() - died < kFreshWithin) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        t = judge_freshness(ctx, run);
    }
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - died).count();
    t.metrics.push_back({"stale_after_crash_ms", ms});
    t.evidence = "writer died after COMMIT; " +
                 (t.reproduced ? closer + " did not delete the key within " + fixed1(ms / 1000) + " s; "
                               : closer + " deleted the key " + fixed1(ms) + " ms after the demo saw the writer die; ") +
                 t.evidence;
    return t;
}

// The crash rows again, with the outbox and with a binlog follower.
void closed_from_outside(DemoContext& ctx, const RaceCase& c) {
    for (const std::string closer : {"outbox", "follower"}) {
        const bool outbox = closer == "outbox";
        for (const auto& s : strategy_infos()) {
            if (!closable_by_outside(s)) continue;
            auto base = ctx.row(c, label(s.name, "None") + (outbox ? kCrashOutbox : kCrashFollower), Mode::Forced);
            if (!base) continue;
            // The live peer: this process replays the dead writer's outbox row, or follows the binlog.
            std::unique_ptr<Outbox> peer;
            std::unique_ptr<DemoFollower> follower;
            if (outbox) {
                peer = std::make_unique<Outbox>(ctx.services().db(), make_redis_entry_store(ctx.services().redis()),
                                                outbox_options());
            } else {
                follower = std::make_unique<DemoFollower>(ctx, ctx.unique("c5-follower"));
            }
            record_forced(
                ctx, std::move(*base),
                [&](int) {
                    ForcedRun run = run_actors(ctx, c, s.name, "None", outbox ? kOutboxVariant : "crash",
                                               Setup{true, 10});
                    return judge_after_crash(ctx, run, outbox ? "the outbox's replay" : "the binlog follower");
                },
                false);
        }
    }
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
    closed_from_outside(ctx, c);
}

}  // namespace

void add_race_c5() {
    add_actor_role(
        "C5",
        [](ActorEnv& e) {
            if (e.variant == "crash" || e.variant == kOutboxVariant) {
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
    for (const char* closer : {kCrashOutbox, kCrashFollower}) {
        for (const auto& s : strategy_infos()) {
            if (closable_by_outside(s)) c.rows.push_back({label(s.name, "None") + closer, Mode::Forced, Outcome::Prevented});
        }
    }
    add_race(std::move(c));
}

}  // namespace lockstep::demo
