#include "stale_cache.h"

#include <algorithm>
#include <thread>

#include "lockstep/cache/redis_client.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/strategies/outbox.h"
#include "products.h"
#include "stats.h"

namespace lockstep::demo::stale {

using namespace std::chrono_literals;
using nlohmann::json;

const std::vector<std::string>& lock_modes() {
    static const std::vector<std::string> all = {"None", "Mutex", "ReadWrite"};
    return all;
}

std::string label(const std::string& strategy, const std::string& mode) {
    for (const auto& s : strategy_infos()) {
        if (s.name == strategy) return s.label + " x " + mode;
    }
    return strategy + " x " + mode;
}

Outcome as_outcome(char c) { return c == 'F' ? Outcome::Prevented : Outcome::Reproduced; }

void StaleActor::await(const std::string& s) const {
    if (!sig().wait(tag + ":" + s, kStepTimeout)) throw TimeoutError("actor waited in vain for '" + s + "'");
}

fault::Action StaleActor::stop_at(const std::string& here, const std::string& go) const {
    return [this, here, go] {
        post(here);
        await(go);
    };
}

void run_then_release(const StaleActor& a, Repo& repo, const std::string& go, const std::function<void()>& body,
                      const std::function<void()>& then) {
    const auto waits = repo.metrics().lock_waits;
    std::atomic<bool> done{false};
    std::atomic<bool> posted{false};
    std::thread watcher([&] {
        while (!done.load()) {
            if (repo.metrics().lock_waits > waits) {
                if (!posted.exchange(true)) a.post(go);
                return;
            }
            std::this_thread::sleep_for(1ms);
        }
    });
    try {
        body();
    } catch (...) {
        done.store(true);
        watcher.join();
        if (!posted.exchange(true)) a.post(go);
        throw;
    }
    done.store(true);
    watcher.join();
    if (!posted.load()) {
        if (then) then();
        if (!posted.exchange(true)) a.post(go);
    }
}

json metrics_json(const RepositoryMetrics& m) {
    return {{"hits", m.hits},         {"misses", m.misses},
            {"fills", m.fills},       {"stale_sets_refused", m.stale_sets_refused},
            {"lock_waits", m.lock_waits}, {"deletes", m.deletes},
            {"deletes_failed", m.deletes_failed}, {"deletes_retried", m.deletes_retried}};
}

void ActorEnv::settle() const {
    if (!repo.settle(20s)) throw TimeoutError("background deletes did not drain");
}

void ActorEnv::set_price(std::int64_t price) const {
    repo.update(a.id, [price](Product& p) { p.price = price; });
}

void add_actor_role(const std::string& race, ActorBody body, bool flaky_store) {
    roles()["stale." + race] = [body = std::move(body), flaky_store](Worker& w) {
        const auto& args = w.args;
        const LockMode mode = lock_mode_named(args["mode"].get<std::string>());
        auto options = repository_options(w.services, args["strategy"].get<std::string>(), mode);
        if (args.value("variant", "") == kOutboxVariant) {
            options.outbox = std::make_shared<Outbox>(w.services.db(), make_redis_entry_store(w.services.redis()),
                                                      outbox_options());
        }
        std::shared_ptr<FlakyStore> flaky;
        std::unique_ptr<Repo> repo;
        if (flaky_store) {
            flaky = std::make_shared<FlakyStore>(make_redis_entry_store(w.services.redis()));
            repo = std::make_unique<Repo>(product_entity(), w.services.db(), flaky, options);
        } else {
            repo = std::make_unique<Repo>(product_entity(), w.services.db(), w.services.redis(), options);
        }
        json out = json::object();
        ActorEnv env{w,
                     StaleActor{w, args["tag"].get<std::string>(), args["product"].get<std::int64_t>()},
                     *repo,
                     flaky.get(),
                     out,
                     args["actor"].get<std::string>(),
                     args["variant"].get<std::string>()};
        body(env);
        env.settle();
        out["metrics"] = metrics_json(repo->metrics());
        return out;
    };
}

std::vector<std::string> actor_names(const RaceCase& c) {
    std::vector<std::string> names;
    for (const auto& r : c.roles) names.push_back(r.substr(0, r.find(':')));
    return names;
}

ForcedRun run_actors(DemoContext& ctx, const RaceCase& c, const std::string& strategy, const std::string& mode,
                     const std::string& variant, Setup setup) {
    auto& s = ctx.services();
    ForcedRun run;
    run.id = ctx.new_ids();
    insert_product(s.db(), run.id, setup.stock, "cached item");
    Repo local(product_entity(), s.db(), s.redis(), repository_options(s, strategy, lock_mode_named(mode)));
    run.key = local.key_of(run.id);
    if (setup.cached_first) {
        local.get(run.id);  // the cache holds v1
        local.settle(20s);
    }
    json base = {{"race", c.race}, {"strategy", strategy}, {"mode", mode}, {"product", run.id},
                 {"tag", ctx.unique("stale")}, {"variant", variant}};
    std::vector<WorkerSpec> specs;
    for (const auto& actor : actor_names(c)) {
        json args = base;
        args["actor"] = actor;
        specs.push_back({"stale." + c.race, args});
    }
    run.results = run_workers(ctx, specs);
    return run;
}

long long sum_metric(const ForcedRun& run, const std::string& name) {
    long long sum = 0;
    for (const auto& r : run.results) {
        if (r.contains("metrics")) sum += r["metrics"][name].get<long long>();
    }
    return sum;
}

namespace {

struct Freshness {
    std::optional<std::int64_t> cached;
    std::int64_t db = 0;
    std::optional<long long> ttl_ms;
    bool stale() const { return cached && *cached < db; }
    bool bounded() const { return stale() && ttl_ms && *ttl_ms <= kTtlBound.count(); }
};

Freshness look(DemoContext& ctx, const std::string& key, std::int64_t id) {
    Freshness f;
    f.cached = cached_version(ctx.services().redis(), key);
    f.db = db_version(ctx.services().db(), id).value_or(0);
    long long pttl = ctx.services().redis().command({"PTTL", key}).integer();
    if (pttl >= 0) f.ttl_ms = pttl;
    return f;
}

std::string describe(const Freshness& f) {
    std::string s = "cache ";
    s += f.cached ? "v" + std::to_string(*f.cached) : std::string("empty");
    s += ", database v" + std::to_string(f.db);
    if (f.stale()) {
        s += f.bounded() ? ": stale, gone within " + fixed1(static_cast<double>(*f.ttl_ms) / 1000) + " s (bounded)"
                         : ": stale until its TTL (" + fixed1(static_cast<double>(f.ttl_ms.value_or(-1)) / 1000) + " s)";
    }
    return s;
}

}  // namespace

Trial judge_freshness(DemoContext& ctx, const ForcedRun& run, const std::string& prefix) {
    Freshness f = look(ctx, run.key, run.id);
    Trial t;
    t.reproduced = f.stale();
    t.evidence = prefix + describe(f);
    const long long refused = sum_metric(run, "stale_sets_refused");
    const long long waits = sum_metric(run, "lock_waits");
    if (refused > 0) t.evidence += "; " + std::to_string(refused) + " stale set refused";
    if (waits > 0) t.evidence += "; " + std::to_string(waits) + " actor waited for the key lock";
    t.metrics = {{"cached_version", f.cached ? static_cast<double>(*f.cached) : -1},
                 {"db_version", static_cast<double>(f.db)},
                 {"stale", f.stale() ? 1 : 0},
                 {"bounded", f.bounded() ? 1 : 0},
                 {"ttl_left_ms", f.ttl_ms ? static_cast<double>(*f.ttl_ms) : -1},
                 {"stale_sets_refused", static_cast<double>(refused)},
                 {"lock_waits", static_cast<double>(waits)},
                 {"deletes_failed", static_cast<double>(sum_metric(run, "deletes_failed"))},
                 {"deletes_retried", static_cast<double>(sum_metric(run, "deletes_retried"))}};
    return t;
}

void add_matrix_race(std::string race, std::string forces, std::vector<std::string> roles, Setup setup,
                     std::map<std::string, char> without_lock) {
    RaceCase c{kScenario, std::move(race), std::move(forces), std::move(roles), "", {}, {}, {}};
    for (const auto& s : strategy_infos()) {
        for (const auto& mode : lock_modes()) {
            const char e = mode == "None" ? without_lock.at(s.name) : 'F';
            c.rows.push_back({label(s.name, mode), Mode::Forced, as_outcome(e)});
        }
    }
    c.run_forced = [setup](DemoContext& ctx, const RaceCase& rc) {
        const int runs = ctx.options().repeat;
        ctx.progress(std::string(kScenario) + ": forced " + rc.race + ", " + std::to_string(strategy_infos().size()) +
                     " strategies x " + std::to_string(lock_modes().size()) + " lock modes" +
                     (runs > 1 ? " (x" + std::to_string(runs) + " each)" : ""));
        for (const auto& s : strategy_infos()) {
            for (const auto& mode : lock_modes()) {
                auto base = ctx.row(rc, label(s.name, mode), Mode::Forced);
                if (!base) continue;
                record_forced(
                    ctx, std::move(*base),
                    [&](int) { return judge_freshness(ctx, run_actors(ctx, rc, s.name, mode, "", setup)); }, false);
            }
        }
    };
    add_race(std::move(c));
}

}  // namespace lockstep::demo::stale
