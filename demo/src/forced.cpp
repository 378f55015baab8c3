#include "forced.h"

#include <exception>

namespace lockstep::demo {

void record_forced(DemoContext& ctx, Result r, const std::function<Trial(int run)>& trial, bool announce) {
    const int runs = ctx.options().repeat;
    if (announce) {
        ctx.progress(r.scenario + ": forced " + r.race + ", " + r.protection +
                     (runs > 1 ? " (x" + std::to_string(runs) + ")" : ""));
    }
    int reproduced = 0;
    int done = 0;
    Trial first;
    try {
        for (int i = 0; i < runs; ++i) {
            Trial t = trial(i);
            if (t.reproduced) ++reproduced;
            if (i == 0) first = std::move(t);
            ++done;
        }
    } catch (const std::exception& e) {
        r.error = std::string(e.what()) + (done > 0 ? " (in run " + std::to_string(done + 1) + ")" : "");
    }
    if (reproduced == done) {
        r.observed = Outcome::Reproduced;
    } else if (reproduced == 0) {
        r.observed = Outcome::Prevented;
    } else {
        r.observed = r.expected == Outcome::Reproduced ? Outcome::Prevented : Outcome::Reproduced;
    }
    if (done == 0) r.observed = r.expected == Outcome::Reproduced ? Outcome::Prevented : Outcome::Reproduced;
    r.evidence = first.evidence;
    if (runs > 1) r.evidence += " [reproduced in " + std::to_string(reproduced) + " of " + std::to_string(done) + " runs]";
    r.metric("runs", done).metric("reproduced_runs", reproduced);
    for (auto& m : first.metrics) r.metrics.push_back(std::move(m));
    ctx.add(std::move(r));
}

}  // namespace lockstep::demo
