// L11 (docs/races.md): a holder cut off from its lock server past its lease. The holder's lock
// service reaches the servers through fault proxies (lockstep::testing's ProxiedLockService); once
// it holds, its proxies drop every packet while its connections stay open. A rival, which reaches
// the servers directly, acquires as soon as the server gives the lock away. Two holders must
// never both believe they hold it:
//   - flag-only validity (demo-only): the holder believes until the server itself says the hold
//     is gone (an on_lost whose reason is not Unreachable). In a partition the server cannot say
//     anything, so the holder still believes when the rival acquires: reproduced.
//   - the library's on-time validity: lost() is true from sent + lease − drift on the holder's
//     own clock, before the server can expire the hold: prevented.
// Either way the holder's late write, fenced with its token, is refused once the rival wrote.
// One row pair per backend; --repeat trials run side by side (each its own proxies, services
// and lock name), since each waits a lease.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "context.h"
#include "lock_backends.h"
#include "lockstep/core/error.h"
#include "lockstep/db/fenced_write.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/servers/proxied_lock_service.h"
#include "race_case.h"
#include "stats.h"

namespace lockstep::demo {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr const char* kScenario = "network";
constexpr auto kLease = 1500ms;
constexpr int kZooKeeperSessionMs = 1500;  // its holds' lease
const char* const kFlagOnly = "flag-only validity (demo-only: believes until the server says it is gone)";
const char* const kOnTime = "on-time validity (lost() from sent + lease - drift)";

std::string label(const std::string& backend, bool flag_only) {
    return backend + ", " + (flag_only ? kFlagOnly : kOnTime);
}

double ms_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

struct TrialResult {
    bool two_believers = false;
    double believed_past_rival_ms = 0;  // > 0: the holder still believed this long after the rival acquired
    double lost_after_ms = -1;          // cut -> the holder's lost() true (on-time rows)
    double rival_after_ms = 0;          // cut -> the rival acquired
    bool late_write_refused = false;
};

TrialResult trial(DemoContext& ctx, const std::string& backend, bool flag_only) {
    Services& services = ctx.services();
    MysqlPool& db = services.db();
    const std::string prefix = services.prefix() + ctx.unique("l11") + ":";
    const std::string url = demo_lock_url(services, backend, kZooKeeperSessionMs);
    LockServiceOptions so;
    so.prefix = prefix;
    ProxiedLockService holder = open_proxied_lock_service(url, so);
    auto rival_service = open_lock_service(url, so);
    const std::int64_t id = ctx.new_ids();
    db.execute("INSERT INTO demo_fenced (id, v, fence) VALUES (?, 0, 0)", {id});

    std::atomic<bool> server_said_gone{false};
    LockOptions lo;
    lo.lease = kLease;
    lo.on_lost = [&](const LockLoss& loss) {
        if (loss.reason != LockLossReason::Unreachable) server_said_gone = true;
    };
    auto held = holder.service->make_mutex("l11", lo);
    auto rival = rival_service->make_mutex("l11", LockOptions{.lease = kLease});

    std::promise<FenceToken> holding;
    std::promise<void> cut, rival_wrote, healed;
    std::atomic<bool> rival_has_it{false};
    std::optional<Clock::time_point> last_believed, first_lost;
    bool refused = false;
    std::thread holder_thread([&] {
        held->lock();
        holding.set_value(held->fence_token());
        cut.get_future().wait();
        const auto give_up = Clock::now() + kLease + 20s;
        // Polls the holder's belief every millisecond: on-time until lost() says so; flag-only
        // until one poll after the rival acquired (it would believe for as long as the partition).
        while (Clock::now() < give_up) {
            const auto before = Clock::now();
            const bool done_after_this = rival_has_it.load();
            const bool believes = flag_only ? !server_said_gone.load() : !held->lost();
            if (!believes) {
                first_lost = Clock::now();
                break;
            }
            last_believed = before;
            if (done_after_this) break;
            std::this_thread::sleep_for(1ms);
        }
        rival_wrote.get_future().wait();
        try {
            fenced_update(db, id, held->fence_token(), {.assignments = "v = ?", .params = {1}, .table = "demo_fenced"});
        } catch (const ConflictError&) {
            refused = true;
        }
        healed.get_future().wait();
        held->unlock();  // reports the loss (log line); never throws
    });
    auto token = holding.get_future();
    if (token.wait_for(30s) != std::future_status::ready) {
        holder.pass();
        cut.set_value();
        rival_wrote.set_value();
        healed.set_value();
        holder_thread.join();
        throw std::runtime_error(backend + ": the holder did not acquire within 30 s");
    }
    const FenceToken old_token = token.get();
    holder.blackhole();
    const auto cut_at = Clock::now();
    cut.set_value();
    const bool acquired = rival->try_lock_for(kLease + 20s);
    const auto rival_at = Clock::now();
    rival_has_it = acquired;
    if (acquired && rival->fence_token() > old_token) {
        fenced_update(db, id, rival->fence_token(), {.assignments = "v = ?", .params = {2}, .table = "demo_fenced"});
    }
    rival_wrote.set_value();
    holder.pass();
    healed.set_value();
    holder_thread.join();
    if (!acquired) throw std::runtime_error(backend + ": the rival never acquired");
    rival->unlock();

    TrialResult r;
    r.rival_after_ms = ms_between(cut_at, rival_at);
    if (first_lost) r.lost_after_ms = ms_between(cut_at, *first_lost);
    r.two_believers = last_believed && *last_believed >= rival_at;
    if (r.two_believers) r.believed_past_rival_ms = ms_between(rival_at, *last_believed);
    r.late_write_refused = refused;
    return r;
}

void run_row(DemoContext& ctx, const RaceCase& c, const std::string& backend, bool flag_only) {
    auto r = ctx.row(c, label(backend, flag_only), Mode::Forced);
    if (!r) return;
    ctx.progress(std::string(kScenario) + ": L11, " + label(backend, flag_only));
    try {
        const int n = ctx.options().repeat;
        std::vector<TrialResult> results(static_cast<std::size_t>(n));
        std::vector<std::string> errors(static_cast<std::size_t>(n));
        std::vector<std::thread> trials;
        for (int i = 0; i < n; ++i) {
            trials.emplace_back([&, i] {
                try {
                    results[static_cast<std::size_t>(i)] = trial(ctx, backend, flag_only);
                } catch (const std::exception& e) {
                    errors[static_cast<std::size_t>(i)] = e.what();
                }
            });
        }
        for (auto& t : trials) t.join();
        for (const auto& e : errors) {
            if (!e.empty()) throw std::runtime_error(e);
        }
        int reproduced = 0, refused = 0;
        Samples lost_ms, rival_ms, past_ms;
        for (const auto& t : results) {
            reproduced += t.two_believers;
            refused += t.late_write_refused;
            if (t.lost_after_ms >= 0) lost_ms.add(t.lost_after_ms);
            rival_ms.add(t.rival_after_ms);
            if (t.two_believers) past_ms.add(t.believed_past_rival_ms);
        }
        r->observed = reproduced > 0 ? Outcome::Reproduced : Outcome::Prevented;
        const std::string writes = "the late fenced write refused in " + std::to_string(refused) + " of " + std::to_string(n);
        if (reproduced > 0) {
            r->evidence = std::to_string(reproduced) + " of " + std::to_string(n) +
                          " runs: the cut-off holder still believed it held " + fixed1(past_ms.percentile(50)) +
                          " ms after the rival acquired (rival after " + fixed1(rival_ms.percentile(50)) + " ms); " + writes;
        } else {
            r->evidence = "lost() true " + fixed1(lost_ms.percentile(50)) + " ms after the cut, the rival acquired after " +
                          fixed1(rival_ms.percentile(50)) + " ms (p50 of " + std::to_string(n) + "); " + writes;
        }
        r->cost = flag_only ? "" : "no round trip: lost() compares the steady clock with valid_until";
        r->metric("runs", n).metric("reproduced_runs", reproduced).metric("late_writes_refused", refused);
        r->metric("rival_after_ms", rival_ms.percentile(50));
        if (!lost_ms.empty()) r->metric("lost_after_ms", lost_ms.percentile(50));
        if (refused != n) r->error = "a late fenced write was applied: " + writes;
    } catch (const std::exception& e) {
        r->error = e.what();
    }
    ctx.add(std::move(*r));
}

void forced(DemoContext& ctx, const RaceCase& c) {
    ctx.services().db().execute(
        "CREATE TABLE IF NOT EXISTS demo_fenced (id BIGINT PRIMARY KEY, v BIGINT NOT NULL, fence BIGINT NOT NULL DEFAULT 0)");
    for (const auto& backend : demo_lock_backends(true)) {
        for (const bool flag_only : {true, false}) run_row(ctx, c, backend, flag_only);
    }
}

}  // namespace

void add_race_l11() {
    RaceCase c{kScenario,
               "L11",
               "the holder's network drops every packet past its lease (its connections stay open); a rival reaching "
               "the server acquires",
               {"holder: holds, then is cut off by its fault proxies; polls its belief every ms; writes late, fenced",
                "rival: waits for the lock directly, acquires once the server lets the holder's hold go, writes fenced"},
               "",
               {},
               forced,
               {}};
    for (const auto& backend : demo_lock_backends(true)) {
        c.rows.push_back({label(backend, true), Mode::Forced, Outcome::Reproduced});
        c.rows.push_back({label(backend, false), Mode::Forced, Outcome::Prevented});
    }
    add_race(std::move(c));
}

}  // namespace lockstep::demo
