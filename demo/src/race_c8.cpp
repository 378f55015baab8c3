// C8 (docs/races.md): a decision taken on a cached value the database has moved past.
//   Stock 1 is cached; two buyers read the stock from the cache, meet, then each writes
//   stock - 1 decided on what it read. Deciding in update() on the locked row sells one.
#include <algorithm>
#include <stdexcept>

#include "lockstep/db/mysql_pool.h"
#include "products.h"
#include "stale_cache.h"

namespace lockstep::demo {

namespace {

using namespace stale;

struct SoldOut : std::runtime_error {
    SoldOut() : std::runtime_error("sold out") {}
};

const char* const kAuthority = "decide in update() on the row (FOR UPDATE)";
std::string cached_label(const std::string& mode) { return "decide on the cached stock, lock mode " + mode; }

Trial trial(DemoContext& ctx, const RaceCase& c, const std::string& mode, const std::string& variant) {
    ForcedRun run = run_actors(ctx, c, "WriteThenDelete", mode, variant, Setup{true, 1});
    auto& db = ctx.services().db();
    long long sold = orders_of(db, run.id);
    Trial t;
    t.reproduced = sold > 1;
    t.evidence = "both buyers saw stock " + std::to_string(run.results[0]["saw_stock"].get<int>()) + " in the cache; " +
                 std::to_string(sold) + " sold of 1, stock column " + std::to_string(stock_of(db, run.id));
    t.metrics = {{"units_sold", static_cast<double>(sold)}, {"oversold", static_cast<double>(std::max(0LL, sold - 1))}};
    return t;
}

void forced(DemoContext& ctx, const RaceCase& c) {
    ctx.progress(std::string(kScenario) + ": forced C8, decisions on cached stock vs on the locked row" +
                 (ctx.options().repeat > 1 ? " (x" + std::to_string(ctx.options().repeat) + " each)" : ""));
    for (const auto& mode : lock_modes()) {
        if (auto base = ctx.row(c, cached_label(mode), Mode::Forced)) {
            record_forced(ctx, std::move(*base), [&](int) { return trial(ctx, c, mode, "cached"); }, false);
        }
    }
    if (auto base = ctx.row(c, kAuthority, Mode::Forced)) {
        record_forced(ctx, std::move(*base), [&](int) { return trial(ctx, c, "None", "authority"); }, false);
    }
}

}  // namespace

void add_race_c8() {
    add_actor_role("C8", [](ActorEnv& e) {
        const bool authority = e.variant == "authority";
        auto seen = e.repo.get(e.a.id);
        if (!seen) throw ConfigError("C8", "product missing");
        // Both buyers have read the (cached) stock before either decides.
        if (!e.a.sig().rendezvous(e.a.tag + ":read", 2, kStepTimeout)) throw TimeoutError("buyers did not meet");
        bool sold = false;
        if (authority) {
            try {
                e.repo.update(e.a.id, [](Product& p) {
                    if (p.stock < 1) throw SoldOut();  // decided on the locked row (FOR UPDATE)
                    p.stock -= 1;
                });
                sold = true;
            } catch (const SoldOut&) {
            }
        } else if (seen->stock >= 1) {
            const int stock = seen->stock;
            e.repo.update(e.a.id, [stock](Product& p) { p.stock = stock - 1; });  // decided on the cached value
            sold = true;
        }
        if (sold) {
            e.w.services.db().execute("INSERT INTO orders (product_id, quantity, status) VALUES (?, 1, 'paid')", {e.a.id});
        }
        e.out["saw_stock"] = seen->stock;
        e.out["sold"] = sold;
    });
    RaceCase c{kScenario, "C8", "stock 1 cached; two buyers read it from the cache, meet, then each sells",
               {"B1: reads the cached stock, meets B2, sells", "B2: the same"}, "", {}, forced, {}};
    for (const auto& mode : lock_modes()) c.rows.push_back({cached_label(mode), Mode::Forced, Outcome::Reproduced});
    c.rows.push_back({kAuthority, Mode::Forced, Outcome::Prevented});
    add_race(std::move(c));
}

}  // namespace lockstep::demo
