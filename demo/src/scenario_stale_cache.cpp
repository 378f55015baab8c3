// stale-cache (RACES C1-C5, C8): the cache and the database disagree.
//
// Forced: each race's interleaving, for every write strategy x lock mode, made deterministic
// with the repository's fault points (strategies/fault_points.h). Each actor (reader, writer) is
// a worker with its own CachedRepository, as separate application servers would be; an actor
// stopped at a fault point is released by the other once that one has finished its step or is
// waiting for the key's lock (its repository's lock_waits grew). After every actor and background
// delete is done, the cache is "stale" when it holds a version older than the database's.
//
//   C1  W1 commits v2, stops before its cache step; W2 commits v3 and does its cache step; W1
//       goes on.
//   C2  R misses and reads v1, stops before its backfill; W commits v2 and does its cache step;
//       R goes on as soon as W returned.
//   C3  the cache holds v1; W stops just before COMMIT (after any delete it does first); R reads
//       and backfills if it missed; W commits and does its cache step.
//   C4  as C2, but R goes on only after W's background deletes (the delayed one) have run.
//   C5  the cache holds v1; W commits v2 and then its cache step fails (Redis times out: the
//       retry queue must fix it) or W's process dies (nothing in the process can fix it).
//   C8  stock 1 cached; two buyers read the stock from the cache, then write stock - 1.
//
// Load: a seeded random mix of reads and writes over a few hot keys per strategy x lock mode,
// with random pauses (up to --jitter-us) at the racy steps, judged by the ConsistencyChecker.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "consistency_checker.h"
#include "context.h"
#include "forced.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/strategies/strategies.h"
#include "product_repository.h"
#include "products.h"
#include "scenarios.h"
#include "stats.h"
#include "thread_faults.h"
#include "workers.h"

namespace lockstep::demo {

namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using Repo = CachedRepository<Product>;

constexpr const char* kScenario = "stale-cache";
constexpr auto kStepTimeout = 30s;

const std::vector<std::string>& lock_modes() {
    static const std::vector<std::string> all = {"None", "Mutex", "ReadWrite"};
    return all;
}

// ---- expectations ---------------------------------------------------------------------------

// Without a lock: per strategy, C1..C4: F fresh, S stale until TTL, B stale but bounded.
// With Mutex or ReadWrite every strategy is fresh (the lock keeps backfills and writes apart).
const std::map<std::string, std::string>& expected_without_locks() {
    static const std::map<std::string, std::string> m = {
        {"WriteThenDelete", "FSFS"},
        // The delayed delete removes a backfill that lands before it (C2), not one that lands
        // after it (C4: a read slower than the delay).
        {"DelayedDoubleDelete", "FFFS"},
        {"TtlBounding", "FBFB"},
        {"WriteThrough", "FFFF"},
        {"Lease", "FFFF"},
        {"DeleteThenCommit", "FSSS"},
        {"WriteThenSet", "SSFS"},
    };
    return m;
}

// C5 when the writer dies between COMMIT and its cache step: only a delete before COMMIT (with
// no reader in between) or the TTL bound helps; the retry queue dies with the process.
char expected_c5_crash(const std::string& strategy) {
    if (strategy == "DelayedDoubleDelete" || strategy == "DeleteThenCommit") return 'F';
    if (strategy == "TtlBounding") return 'B';
    return 'S';
}

Outcome as_outcome(char c) { return c == 'F' ? Outcome::Prevented : Outcome::Reproduced; }

// ---- a flaky cache for C5 ------------------------------------------------------------------

// Delegates to the real store; after arm(), the next remove or fill fails as a Redis timeout
// would. The retry queue then runs on the repository's scheduler thread, through this same
// store, and succeeds.
class FlakyStore final : public EntryStore {
public:
    explicit FlakyStore(std::shared_ptr<EntryStore> real) : real_(std::move(real)) {}
    void arm() { fail_next_.store(true); }
    int failed() const { return failed_.load(); }

    std::optional<std::string> get(const std::string& key) override { return real_->get(key); }
    std::vector<std::optional<std::string>> get_many(const std::vector<std::string>& keys) override {
        return real_->get_many(keys);
    }
    Claim claim(const std::string& key, const std::string& marker, std::chrono::milliseconds ttl) override {
        return real_->claim(key, marker, ttl);
    }
    std::vector<Claim> claim_many(const std::vector<std::string>& keys, const std::vector<std::string>& markers,
                                  std::chrono::milliseconds ttl) override {
        return real_->claim_many(keys, markers, ttl);
    }
    FillOutcome fill(const Fill& f) override {
        maybe_fail();
        return real_->fill(f);
    }
    std::vector<FillOutcome> fill_many(const std::vector<Fill>& fills) override {
        maybe_fail();
        return real_->fill_many(fills);
    }
    bool remove_if_equals(const std::string& key, const std::string& expected) override {
        return real_->remove_if_equals(key, expected);
    }
    void remove(const std::vector<std::string>& keys) override {
        maybe_fail();
        real_->remove(keys);
    }

private:
    void maybe_fail() {
        if (fail_next_.exchange(false)) {
            failed_.fetch_add(1);
            throw TimeoutError("forced: Redis did not answer the cache step in time");
        }
    }
    std::shared_ptr<EntryStore> real_;
    std::atomic<bool> fail_next_{false};
    std::atomic<int> failed_{0};
};

// ---- actors ------------------------------------------------------------------------------

struct StaleActor {
    Worker& w;
    std::string tag;
    std::int64_t id;

    Signals& sig() const { return w.services.signals(); }
    void post(const std::string& s) const { sig().post(tag + ":" + s); }
    void await(const std::string& s) const {
        if (!sig().wait(tag + ":" + s, kStepTimeout)) throw TimeoutError("actor waited in vain for '" + s + "'");
    }
    // A fault point action: say we are there, wait to be let go.
    fault::Action stop_at(const std::string& here, const std::string& go) const {
        return [this, here, go] {
            post(here);
            await(go);
        };
    }
};

// Runs `body`; posts `go` as soon as `body` returned (after `then`) or `repo` started waiting
// for a key lock, whichever comes first.
void run_then_release(const StaleActor& a, Repo& repo, const std::string& go, const std::function<void()>& body,
                      const std::function<void()>& then = {}) {
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

struct SoldOut : std::runtime_error {
    SoldOut() : std::runtime_error("sold out") {}
};

// Worker role "stale.actor".
json actor_role(Worker& w) {
    const auto& args = w.args;
    const std::string race = args["race"].get<std::string>();
    const std::string actor = args["actor"].get<std::string>();
    const std::string strategy = args["strategy"].get<std::string>();
    const LockMode mode = lock_mode_named(args["mode"].get<std::string>());
    StaleActor a{w, args["tag"].get<std::string>(), args["product"].get<std::int64_t>()};
    auto options = repository_options(w.services, strategy, mode);
    std::shared_ptr<FlakyStore> flaky;
    std::unique_ptr<Repo> repo;
    if (race == "C5") {
        flaky = std::make_shared<FlakyStore>(make_redis_entry_store(w.services.redis()));
        repo = std::make_unique<Repo>(product_entity(), w.services.db(), flaky, options);
    } else {
        repo = std::make_unique<Repo>(product_entity(), w.services.db(), w.services.redis(), options);
    }
    json out = json::object();
    auto settle = [&] {
        if (!repo->settle(20s)) throw TimeoutError("background deletes did not drain");
    };
    auto set_price = [&](std::int64_t price) { repo->update(a.id, [price](Product& p) { p.price = price; }); };

    if (race == "C1") {
        if (actor == "W1") {
            ThreadFault stop(std::string(repo_points::after_commit), a.stop_at("w1_at", "w1_go"));
            set_price(200);
        } else {
            a.await("w1_at");
            run_then_release(a, *repo, "w1_go", [&] { set_price(300); });
        }
    } else if (race == "C2" || race == "C4") {
        if (actor == "R") {
            ThreadFault stop(std::string(repo_points::after_db_read), a.stop_at("r_at", "r_go"));
            auto v = repo->get_versioned(a.id);
            out["read_version"] = v ? v->version : 0;
        } else {
            a.await("r_at");
            run_then_release(a, *repo, "r_go", [&] { set_price(200); },
                             race == "C4" ? std::function<void()>(settle) : std::function<void()>());
        }
    } else if (race == "C3") {
        if (actor == "W") {
            ThreadFault stop(std::string(repo_points::before_commit), a.stop_at("w_at", "w_go"));
            set_price(200);
        } else {
            a.await("w_at");
            run_then_release(a, *repo, "w_go", [&] {
                auto v = repo->get_versioned(a.id);
                out["read_version"] = v ? v->version : 0;
            });
        }
    } else if (race == "C5") {
        const std::string variant = args["variant"].get<std::string>();
        if (variant == "crash") {
            // The writer's process dies right after COMMIT: its cache step and its retry queue
            // die with it.
            ThreadFault die(std::string(repo_points::after_commit), [&w] { w.crash(); });
            set_price(200);
        } else {
            ThreadFault timeout(std::string(repo_points::after_commit), [&flaky] { flaky->arm(); });
            set_price(200);
        }
        out["cache_step_failures"] = flaky->failed();
    } else if (race == "C8") {
        const bool authority = args["variant"].get<std::string>() == "authority";
        auto seen = repo->get(a.id);
        if (!seen) throw ConfigError("C8", "product missing");
        // Both buyers have read the (cached) stock before either decides.
        if (!a.sig().rendezvous(a.tag + ":read", 2, kStepTimeout)) throw TimeoutError("buyers did not meet");
        bool sold = false;
        if (authority) {
            try {
                repo->update(a.id, [](Product& p) {
                    if (p.stock < 1) throw SoldOut();  // decided on the locked row (FOR UPDATE)
                    p.stock -= 1;
                });
                sold = true;
            } catch (const SoldOut&) {
            }
        } else if (seen->stock >= 1) {
            const int stock = seen->stock;
            repo->update(a.id, [stock](Product& p) { p.stock = stock - 1; });  // decided on the cached value
            sold = true;
        }
        if (sold) {
            w.services.db().execute("INSERT INTO orders (product_id, quantity, status) VALUES (?, 1, 'paid')", {a.id});
        }
        out["saw_stock"] = seen->stock;
        out["sold"] = sold;
    } else {
        throw ConfigError("race", "unknown stale-cache race " + race);
    }
    settle();
    out["metrics"] = metrics_json(repo->metrics());
    return out;
}

// ---- forced cases ---------------------------------------------------------------------------

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

// The actor roles of each race, in the order they start.
std::vector<std::string> actors_of(const std::string& race) {
    if (race == "C1") return {"W1", "W2"};
    if (race == "C2" || race == "C4") return {"R", "W"};
    if (race == "C3") return {"W", "R"};
    if (race == "C5") return {"W"};
    return {"B1", "B2"};  // C8
}

Trial forced_trial(DemoContext& ctx, const std::string& race, const std::string& strategy, const std::string& mode,
                   const std::string& variant) {
    auto& s = ctx.services();
    const auto id = ctx.new_ids();
    insert_product(s.db(), id, race == "C8" ? 1 : 10, "cached item");
    auto options = repository_options(s, strategy, lock_mode_named(mode));
    Repo local(product_entity(), s.db(), s.redis(), options);
    const std::string key = local.key_of(id);
    if (race == "C3" || race == "C5" || race == "C8") {
        local.get(id);  // the cache holds v1
        local.settle(20s);
    }
    json base = {{"race", race}, {"strategy", strategy}, {"mode", mode}, {"product", id},
                 {"tag", ctx.unique("stale")}, {"variant", variant}};
    std::vector<WorkerSpec> specs;
    for (const auto& actor : actors_of(race)) {
        json args = base;
        args["actor"] = actor;
        specs.push_back({"stale.actor", args});
    }
    auto results = run_workers(ctx, specs);
    Trial t;
    if (race == "C8") {
        long long sold = orders_of(s.db(), id);
        t.reproduced = sold > 1;
        t.evidence = "both buyers saw stock " + std::to_string(results[0]["saw_stock"].get<int>()) + " in the cache; " +
                     std::to_string(sold) + " sold of 1, stock column " + std::to_string(stock_of(s.db(), id));
        t.metrics = {{"units_sold", static_cast<double>(sold)}, {"oversold", static_cast<double>(std::max(0LL, sold - 1))}};
        return t;
    }
    Freshness f = look(ctx, key, id);
    t.reproduced = f.stale();
    t.evidence = describe(f);
    long long refused = 0, waits = 0, failed = 0, retried = 0;
    for (const auto& r : results) {
        if (!r.contains("metrics")) continue;
        refused += r["metrics"]["stale_sets_refused"].get<long long>();
        waits += r["metrics"]["lock_waits"].get<long long>();
        failed += r["metrics"]["deletes_failed"].get<long long>();
        retried += r["metrics"]["deletes_retried"].get<long long>();
    }
    if (race == "C5") {
        std::string what;
        if (variant == "crash") {
            what = "writer died after COMMIT; ";
        } else if (results[0].value("cache_step_failures", 0) == 0) {
            what = "no cache step after COMMIT to time out (it deleted before); ";
        } else {
            what = "cache step after COMMIT timed out, " + std::to_string(retried) + " background retr" +
                   (retried == 1 ? "y" : "ies") + "; ";
        }
        t.evidence = what + t.evidence;
    }
    if (refused > 0) t.evidence += "; " + std::to_string(refused) + " stale set refused";
    if (waits > 0) t.evidence += "; " + std::to_string(waits) + " actor waited for the key lock";
    t.metrics = {{"cached_version", f.cached ? static_cast<double>(*f.cached) : -1},
                 {"db_version", static_cast<double>(f.db)},
                 {"stale", f.stale() ? 1 : 0},
                 {"bounded", f.bounded() ? 1 : 0},
                 {"ttl_left_ms", f.ttl_ms ? static_cast<double>(*f.ttl_ms) : -1},
                 {"stale_sets_refused", static_cast<double>(refused)},
                 {"lock_waits", static_cast<double>(waits)},
                 {"deletes_failed", static_cast<double>(failed)},
                 {"deletes_retried", static_cast<double>(retried)}};
    return t;
}

std::string label(const std::string& strategy, const std::string& mode) {
    for (const auto& s : strategy_infos()) {
        if (s.name == strategy) return s.label + " x " + mode;
    }
    return strategy + " x " + mode;
}

void forced_cases(DemoContext& ctx) {
    const int runs = ctx.options().repeat;
    const std::string times = runs > 1 ? " (x" + std::to_string(runs) + " each)" : "";
    const std::string matrix = std::to_string(strategy_infos().size()) + " strategies x " +
                               std::to_string(lock_modes().size()) + " lock modes";
    const char* races[] = {"C1", "C2", "C3", "C4"};
    for (int r = 0; r < 4; ++r) {
        ctx.progress(std::string(kScenario) + ": forced " + races[r] + ", " + matrix + times);
        for (const auto& s : strategy_infos()) {
            for (const auto& mode : lock_modes()) {
                char c = mode == "None" ? expected_without_locks().at(s.name)[r] : 'F';
                Result base = make_result(kScenario, races[r], label(s.name, mode), Mode::Forced, as_outcome(c));
                record_forced(
                    ctx, std::move(base), [&](int) { return forced_trial(ctx, races[r], s.name, mode, ""); }, false);
            }
        }
    }
    ctx.progress(std::string(kScenario) + ": forced C5 (a Redis timeout, a writer crash), every strategy" + times);
    for (const auto& s : strategy_infos()) {
        Result base = make_result(kScenario, "C5", label(s.name, "None") + ", Redis timeout on the cache step",
                                  Mode::Forced, Outcome::Prevented);
        record_forced(
            ctx, std::move(base), [&](int) { return forced_trial(ctx, "C5", s.name, "None", "timeout"); }, false);
    }
    for (const auto& s : strategy_infos()) {
        Result base = make_result(kScenario, "C5", label(s.name, "None") + ", writer dies after COMMIT", Mode::Forced,
                                  as_outcome(expected_c5_crash(s.name)));
        record_forced(
            ctx, std::move(base), [&](int) { return forced_trial(ctx, "C5", s.name, "None", "crash"); }, false);
    }
    ctx.progress(std::string(kScenario) + ": forced C8, decisions on cached stock vs on the locked row" + times);
    for (const auto& mode : lock_modes()) {
        Result base = make_result(kScenario, "C8", "decide on the cached stock, lock mode " + mode, Mode::Forced,
                                  Outcome::Reproduced);
        record_forced(
            ctx, std::move(base), [&](int) { return forced_trial(ctx, "C8", "WriteThenDelete", mode, "cached"); }, false);
    }
    Result base = make_result(kScenario, "C8", "decide in update() on the row (FOR UPDATE)", Mode::Forced,
                              Outcome::Prevented);
    record_forced(
        ctx, std::move(base), [&](int) { return forced_trial(ctx, "C8", "WriteThenDelete", "None", "authority"); },
        false);
}

// ---- the random mixed workload --------------------------------------------------------------

constexpr int kLoadKeys = 8;
constexpr int kReadPercent = 80;
constexpr int kJitterUs = 1000;

// Worker role "stale.load": a seeded random mix of reads and writes over the keys.
json load_role(Worker& w) {
    const auto& args = w.args;
    const std::string strategy = args["strategy"].get<std::string>();
    const LockMode mode = lock_mode_named(args["mode"].get<std::string>());
    const auto keys = args["keys"].get<std::vector<std::int64_t>>();
    const int ops = args["ops"].get<int>();
    const int read_percent = args["read_percent"].get<int>();
    const int jitter_us = args["jitter_us"].get<int>();
    Repo repo(product_entity(), w.services.db(), w.services.redis(), repository_options(w.services, strategy, mode));
    std::mt19937_64 rng(args["seed"].get<std::uint64_t>() * 1000003 + static_cast<std::uint64_t>(w.index));
    std::uniform_int_distribution<int> pick_key(0, static_cast<int>(keys.size()) - 1);
    std::uniform_int_distribution<int> percent(0, 99);
    std::uniform_int_distribution<int> jitter(0, jitter_us);
    std::mt19937_64 pause_rng(rng());
    std::int64_t commit_us = 0;
    // Random pauses at the racy steps widen the windows that random timing alone rarely hits.
    auto pause = [&] {
        std::this_thread::sleep_for(std::chrono::microseconds(jitter(pause_rng)));
    };
    ThreadFault after_read(std::string(repo_points::after_db_read), pause, -1);
    ThreadFault after_commit(std::string(repo_points::after_commit), [&] {
        commit_us = wall_us();
        pause();
    }, -1);
    std::vector<ReadRecord> reads;
    std::vector<WriteRecord> writes;
    Samples read_ms, write_ms;
    const auto start = wall_us();
    for (int i = 0; i < ops; ++i) {
        const auto id = keys[pick_key(rng)];
        if (percent(rng) < read_percent) {
            auto t0 = std::chrono::steady_clock::now();
            const auto s = wall_us();
            auto v = repo.get_versioned(id);
            reads.push_back({id, v ? v->version : 0, s, wall_us()});
            read_ms.add(ms_between(t0, std::chrono::steady_clock::now()));
        } else {
            auto t0 = std::chrono::steady_clock::now();
            std::int64_t written = 0;
            const auto price = static_cast<std::int64_t>(rng() % 100000);
            repo.update(id, [&](Product& p) {
                written = p.version + 1;  // the repository writes version + 1
                p.price = price;
            });
            writes.push_back({id, written, commit_us, wall_us()});
            write_ms.add(ms_between(t0, std::chrono::steady_clock::now()));
        }
    }
    const auto end = wall_us();
    if (!repo.settle(30s)) throw TimeoutError("background deletes did not drain");
    return {{"reads", ConsistencyChecker::to_json(reads)},
            {"writes", ConsistencyChecker::to_json(writes)},
            {"read_ms", read_ms.to_json()},
            {"write_ms", write_ms.to_json()},
            {"start_us", start},
            {"end_us", end},
            {"metrics", metrics_json(repo.metrics())}};
}

// Samples the cached versions of `keys` every millisecond until stopped.
class CacheSampler {
public:
    CacheSampler(RedisClient& redis, std::vector<std::pair<std::int64_t, std::string>> keys)
        : redis_(redis), keys_(std::move(keys)), thread_([this] { loop(); }) {}
    ~CacheSampler() { stop(); }
    void stop() {
        stopping_.store(true);
        if (thread_.joinable()) thread_.join();
    }
    std::vector<CacheSample> samples() {
        stop();
        return samples_;
    }

private:
    void loop() {
        std::vector<std::vector<std::string>> gets;
        for (const auto& [id, key] : keys_) gets.push_back({"GET", key});
        while (!stopping_.load()) {
            const auto at = wall_us();
            try {
                auto replies = redis_.pipeline(gets);
                for (std::size_t i = 0; i < replies.size(); ++i) {
                    std::optional<std::int64_t> v;
                    if (replies[i].type() == RedisReply::Type::String) {
                        auto e = CacheEntry::decode(replies[i].str());
                        if (e && e->kind == CacheEntry::Kind::Value) v = e->version;
                        if (e && e->kind == CacheEntry::Kind::NotFound) v = 0;
                    }
                    samples_.push_back({at, keys_[i].first, v});
                }
            } catch (const std::exception&) {
                // A missed sample is only a gap in the picture.
            }
            std::this_thread::sleep_for(1ms);
        }
    }
    RedisClient& redis_;
    std::vector<std::pair<std::int64_t, std::string>> keys_;
    std::vector<CacheSample> samples_;
    std::atomic<bool> stopping_{false};
    std::thread thread_;
};

void load_case(DemoContext& ctx, const std::string& strategy, const std::string& mode) {
    auto& s = ctx.services();
    const int workers = ctx.options().workers();
    const int ops = ctx.options().iterations;
    const bool lasting_closed = mode != "None" || strategy == "WriteThrough" || strategy == "Lease";
    Result r = make_result(kScenario, "C1-C4", label(strategy, mode), Mode::Load,
                           lasting_closed ? Outcome::Prevented : Outcome::Reproduced);
    if (strategy == strategy_infos().front().name && mode == lock_modes().front()) {
        ctx.progress(std::string(kScenario) + ": load, " + std::to_string(strategy_infos().size() * lock_modes().size()) +
                     " strategy x lock mode runs of " + std::to_string(workers) + " workers x " + std::to_string(ops) +
                     " ops, " + std::to_string(kReadPercent) + "% reads, " + std::to_string(kLoadKeys) + " keys");
    }
    const auto first = ctx.new_ids(kLoadKeys);
    std::vector<std::int64_t> ids;
    Repo local(product_entity(), s.db(), s.redis(), repository_options(s, strategy, lock_mode_named(mode)));
    std::vector<std::pair<std::int64_t, std::string>> keys;
    ConsistencyChecker checker;
    for (int k = 0; k < kLoadKeys; ++k) {
        ids.push_back(first + k);
        insert_product(s.db(), first + k, 10, "hot item");
        keys.emplace_back(first + k, local.key_of(first + k));
        checker.initial(first + k, 1);
    }
    json args = {{"strategy", strategy}, {"mode", mode},           {"keys", ids},
                 {"ops", ops},           {"read_percent", kReadPercent}, {"jitter_us", kJitterUs},
                 {"seed", ctx.options().seed}};
    std::vector<json> results;
    {
        CacheSampler sampler(s.redis(), keys);
        results = run_workers(ctx, std::vector<WorkerSpec>(workers, WorkerSpec{"stale.load", args}));
        for (const auto& smp : sampler.samples()) checker.add(smp);
    }
    Samples read_ms, write_ms;
    std::int64_t start = INT64_MAX, end = 0;
    long long refused = 0, hits = 0, misses = 0;
    for (const auto& x : results) {
        checker.add_json(x["reads"], x["writes"]);
        read_ms.merge(Samples::from_json(x["read_ms"]));
        write_ms.merge(Samples::from_json(x["write_ms"]));
        start = std::min(start, x["start_us"].get<std::int64_t>());
        end = std::max(end, x["end_us"].get<std::int64_t>());
        refused += x["metrics"]["stale_sets_refused"].get<long long>();
        hits += x["metrics"]["hits"].get<long long>();
        misses += x["metrics"]["misses"].get<long long>();
    }
    for (const auto& [id, key] : keys) checker.final_state(id, cached_version(s.redis(), key), db_version(s.db(), id));
    ConsistencyReport c = checker.analyse();
    const double seconds = std::max(1e-6, static_cast<double>(end - start) / 1e6);
    const double ops_per_s = static_cast<double>(read_ms.size() + write_ms.size()) / seconds;
    const bool lasting = c.lasting_stale_reads > 0 || c.lasting_stale_entries > 0 || !c.disagreeing_keys.empty();
    r.observed = lasting ? Outcome::Reproduced : Outcome::Prevented;
    r.evidence = std::to_string(c.stale_reads) + " of " + std::to_string(c.reads) + " reads stale (" +
                 fixed2(c.stale_read_rate * 100) + "%), " + std::to_string(c.lasting_stale_reads) +
                 " after the write had returned; stale entries lived max " + fixed1(c.stale_entry_life_max_ms) +
                 " ms, p99 " + fixed1(c.stale_entry_life_p99_ms) + " ms; " + std::to_string(c.disagreeing_keys.size()) +
                 " keys disagree after drain";
    r.cost = fixed1(ops_per_s) + " ops/s, read p99 " + fixed2(read_ms.percentile(99)) + " ms, write p99 " +
             fixed2(write_ms.percentile(99)) + " ms";
    r.metric("reads", static_cast<double>(c.reads))
        .metric("writes", static_cast<double>(write_ms.size()))
        .metric("stale_reads", static_cast<double>(c.stale_reads))
        .metric("stale_read_rate", c.stale_read_rate)
        .metric("stale_read_age_max_ms", c.stale_read_age_max_ms)
        .metric("stale_read_age_p99_ms", c.stale_read_age_p99_ms)
        .metric("lasting_stale_reads", static_cast<double>(c.lasting_stale_reads))
        .metric("stale_entries", static_cast<double>(c.stale_entries))
        .metric("lasting_stale_entries", static_cast<double>(c.lasting_stale_entries))
        .metric("stale_entry_life_max_ms", c.stale_entry_life_max_ms)
        .metric("stale_entry_life_p99_ms", c.stale_entry_life_p99_ms)
        .metric("cache_samples", static_cast<double>(c.samples))
        .metric("keys_disagreeing_after_drain", static_cast<double>(c.disagreeing_keys.size()))
        .metric("stale_sets_refused", static_cast<double>(refused))
        .metric("hit_ratio", hits + misses > 0 ? static_cast<double>(hits) / static_cast<double>(hits + misses) : 0)
        .metric("ops_per_s", ops_per_s)
        .metric("read_p50_ms", read_ms.percentile(50))
        .metric("read_p99_ms", read_ms.percentile(99))
        .metric("write_p50_ms", write_ms.percentile(50))
        .metric("write_p99_ms", write_ms.percentile(99))
        .metric("workers", workers)
        .metric("seconds", seconds);
    ctx.add(std::move(r));
}

// The forced results as one matrix: strategy x lock mode against the races, so that which
// protection closes which race reads at a glance.
void add_matrix(DemoContext& ctx) {
    const std::vector<std::string> columns = {"C1", "C2", "C3", "C4", "C5 timeout", "C5 crash"};
    std::map<std::string, std::map<std::string, std::string>> cells;
    std::vector<std::string> rows;
    for (const auto& r : ctx.report().results_of(kScenario)) {
        if (r.mode != Mode::Forced || r.race == "C8") continue;
        std::string row = r.protection;
        std::string column = r.race;
        if (r.race == "C5") {
            const bool crash = row.find("dies") != std::string::npos;
            column = crash ? "C5 crash" : "C5 timeout";
            row = row.substr(0, row.find(','));
        }
        if (std::find(rows.begin(), rows.end(), row) == rows.end()) rows.push_back(row);
        bool bounded = false;
        for (const auto& [name, value] : r.metrics) {
            if (name == "bounded" && value > 0) bounded = true;
        }
        std::string cell = !r.error.empty() ? "error"
                           : r.observed == Outcome::Prevented ? "closed"
                           : bounded ? "bounded"
                                     : "OPEN";
        if (!passed(r)) cell += " (FAIL)";
        cells[row][column] = cell;
    }
    if (rows.empty()) return;
    std::size_t w0 = 0;
    for (const auto& row : rows) w0 = std::max(w0, row.size());
    std::string text =
        "stale-cache, forced, at a glance: closed = the cache ends fresh; OPEN = stale until the TTL; bounded = stale "
        "until the TtlBounding cap\n";
    auto line = [&](const std::string& first, const std::vector<std::string>& rest) {
        std::string l = first + std::string(w0 - first.size() + 2, ' ');
        for (const auto& c : rest) l += c + std::string(c.size() < 12 ? 12 - c.size() : 1, ' ');
        while (!l.empty() && l.back() == ' ') l.pop_back();
        text += l + "\n";
    };
    line("strategy x lock mode", columns);
    for (const auto& row : rows) {
        std::vector<std::string> rest;
        for (const auto& c : columns) rest.push_back(cells[row].count(c) ? cells[row][c] : "-");
        line(row, rest);
    }
    ctx.report().add_note(kScenario, text);
}

void run(DemoContext& ctx) {
    if (ctx.options().want_forced()) {
        forced_cases(ctx);
        add_matrix(ctx);
    }
    if (!ctx.options().want_load()) return;
    for (const auto& s : strategy_infos()) {
        for (const auto& mode : lock_modes()) load_case(ctx, s.name, mode);
    }
}

}  // namespace

void add_stale_cache() {
    scenarios().push_back({kScenario, "C1, C2, C3, C4, C5, C8",
                           "every write strategy x lock mode under each forced cache race, then a seeded random "
                           "read/write mix judged by a consistency checker (stale-read rate, stale entry lifetime, "
                           "keys that disagree after the run)",
                           run});
    roles()["stale.actor"] = actor_role;
    roles()["stale.load"] = load_role;
}

}  // namespace lockstep::demo
