// C11 (docs/races.md): versions that go backwards.
//   The row is at v5 and R has read it. It is deleted and inserted again while R is paused before
//   its backfill (or an operator resets it by raw SQL while the cache holds v5); then one more
//   repository write. The first version scheme restarted versions at 1 and compared a fill only with what the key
//   happened to hold: R's v5 lands over the re-inserted v1, and the next write (v2) is refused as
//   "stale", so the deleted row is served until the TTL. The library's versions continue above
//   every version written before (max(version + 1, database clock)), a backfill needs its own
//   marker, and a write-through set deletes a higher version instead of being refused by it.
//
// That scheme is kept HERE only (namespace round1), to reproduce the race: a fill script
// as that scheme had it, and writes whose versions restart at 1. The library does not ship it.
#include "lockstep/cache/redis_client.h"
#include "lockstep/cache/redis_script.h"
#include "lockstep/db/mysql_pool.h"
#include "stale_cache.h"

namespace lockstep::demo {

namespace {

using namespace stale;

namespace round1 {

// The first scheme's fill_if_newer (backfills and write-through sets alike): refused only by a value of a
// higher version; an empty key, a marker or a lower version is overwritten.
const RedisScript& fill_script() {
    static const RedisScript script(R"lua(
local function newer(a, b)
  if #a ~= #b then return #a > #b end
  return a > b
end
local cur = redis.call('GET', KEYS[1])
if cur then
  local cv = string.match(cur, '^v(%d+):')
  if cv then
    if cv == ARGV[2] then return 2 end
    if not newer(ARGV[2], cv) then return 0 end
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
return 1
)lua");
    return script;
}

FillOutcome fill(RedisClient& redis, const std::string& key, const std::string& entry, std::chrono::milliseconds ttl) {
    auto decoded = CacheEntry::decode(entry);
    const std::string version = decoded && decoded->kind == CacheEntry::Kind::Value ? std::to_string(decoded->version) : "";
    switch (redis.eval(fill_script(), {key}, {entry, version, std::to_string(ttl.count())}).integer()) {
        case 1: return FillOutcome::Stored;
        case 2: return FillOutcome::Unchanged;
        default: return FillOutcome::Refused;
    }
}

// The library's store with the first scheme's fills: a backfill ignores whether its marker survived.
class Store final : public EntryStore {
public:
    Store(RedisClient& redis, std::chrono::milliseconds ttl) : redis_(redis), real_(make_redis_entry_store(redis)), ttl_(ttl) {}
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
    FillOutcome fill(const Fill& f) override { return round1::fill(redis_, f.key, f.entry, ttl_); }
    std::vector<FillOutcome> fill_many(const std::vector<Fill>& fills) override {
        std::vector<FillOutcome> out;
        for (const auto& f : fills) out.push_back(fill(f));
        return out;
    }
    bool remove_if_equals(const std::string& key, const std::string& expected) override {
        return real_->remove_if_equals(key, expected);
    }
    void remove(const std::vector<std::string>& keys) override { real_->remove(keys); }

private:
    RedisClient& redis_;
    std::shared_ptr<EntryStore> real_;
    std::chrono::milliseconds ttl_;
};

// The first scheme's write-through step after COMMIT: the written row, set with the first scheme's fill.
FillOutcome set_row(Worker& w, const std::string& key, std::int64_t id) {
    auto row = w.services.db().query_one("SELECT id, version, name, price, stock FROM products WHERE id = ?", {id});
    if (!row) throw ConfigError("C11", "product missing");
    const Product p = product_entity().from_row(*row);
    return fill(w.services.redis(), key, CacheEntry::encode_value(p.version, JsonCodec<Product>().encode(p)),
                std::chrono::seconds(60));
}

// The first scheme's writes: an insert writes version 1, an update version + 1.
void remove(Worker& w, const std::string& key, std::int64_t id) {
    w.services.db().execute("DELETE FROM products WHERE id = ?", {id});
    w.services.redis().del({key});
}
void insert(Worker& w, const std::string& key, std::int64_t id, std::int64_t price) {
    w.services.db().execute("INSERT INTO products (id, version, name, price, stock) VALUES (?, 1, 're-inserted', ?, 10)",
                            {id, price});
    set_row(w, key, id);
}
FillOutcome update_price(Worker& w, const std::string& key, std::int64_t id, std::int64_t price) {
    w.services.db().execute("UPDATE products SET price = ?, version = version + 1 WHERE id = ?", {price, id});
    return set_row(w, key, id);
}

}  // namespace round1

const char* const kRound1 = "WriteThrough, versions restart at 1 (demo-only)";
const char* const kPaused = ", remove + insert under a paused reader";
const char* const kReset = ", reset by raw SQL";
constexpr std::int64_t kOldPrice = 100, kReinsertedPrice = 300, kRepairPrice = 777;

bool is_round1(const std::string& variant) { return variant.rfind("round1", 0) == 0; }
bool is_paused(const std::string& variant) { return variant.find("paused") != std::string::npos; }

void actor(ActorEnv& e) {
    const bool old = is_round1(e.variant);
    const bool paused = is_paused(e.variant);
    const std::string key = e.repo.key_of(e.a.id);
    if (e.actor == "R") {
        // Under the first scheme the reader's repository fills as it did.
        std::unique_ptr<Repo> own;
        Repo* repo = &e.repo;
        if (old) {
            auto options = repository_options(e.w.services, "WriteThrough", LockMode::None);
            own = std::make_unique<Repo>(product_entity(), e.w.services.db(),
                                         std::make_shared<round1::Store>(e.w.services.redis(), options.ttl), options);
            repo = own.get();
        }
        e.a.await("w_ready");
        {
            std::optional<ThreadFault> stop;
            if (paused) stop.emplace(std::string(repo_points::after_db_read), e.a.stop_at("r_at", "r_go"));
            auto p = repo->get(e.a.id);
            e.out["read_version"] = p ? p->version : 0;
        }
        if (!repo->settle(kStepTimeout)) throw TimeoutError("background deletes did not drain");
        e.out["stale_sets_refused"] = repo->metrics().stale_sets_refused;
        e.a.post("r_done");
        return;
    }
    // W: the row has a history (v5 under the first scheme; one library write otherwise).
    if (old) {
        e.w.services.db().execute("UPDATE products SET price = ?, version = 5 WHERE id = ?", {kOldPrice, e.a.id});
    } else {
        e.set_price(kOldPrice);
    }
    e.a.post("w_ready");
    if (paused) {
        // R has read the row and stopped before its backfill: remove it and insert it again.
        e.a.await("r_at");
        if (old) {
            round1::remove(e.w, key, e.a.id);
            round1::insert(e.w, key, e.a.id, kReinsertedPrice);
            e.a.post("r_go");
        } else {
            run_then_release(e.a, e.repo, "r_go", [&] {
                if (!e.repo.remove(e.a.id)) throw ConfigError("C11", "product missing");
                e.repo.insert(Product{e.a.id, "re-inserted", kReinsertedPrice, 10, 0});
            });
        }
    }
    e.a.await("r_done");
    if (!paused) {
        // An operator restores the row by hand (lower version, other data); nothing tells the cache.
        e.w.services.db().execute("DELETE FROM products WHERE id = ?", {e.a.id});
        e.w.services.db().execute(
            "INSERT INTO products (id, version, name, price, stock) VALUES (?, 1, 'restored', ?, 10)",
            {e.a.id, kReinsertedPrice});
    }
    // One more write: it must leave the cache agreeing with the database.
    if (old) {
        e.out["repair_set_refused"] = round1::update_price(e.w, key, e.a.id, kRepairPrice) == FillOutcome::Refused;
    } else {
        e.set_price(kRepairPrice);
    }
}

Trial judge(DemoContext& ctx, const ForcedRun& run) {
    auto& s = ctx.services();
    // What a reader gets now, through the library.
    Repo reader(product_entity(), s.db(), s.redis(), repository_options(s, "WriteThrough", LockMode::None));
    auto got = reader.get(run.id);
    reader.settle(kStepTimeout);
    const std::int64_t db_price = s.db().query_one("SELECT price FROM products WHERE id = ?", {run.id})->get<std::int64_t>("price");
    const auto cached = cached_version(s.redis(), run.key);
    const auto db = db_version(s.db(), run.id).value_or(0);
    Trial t;
    t.reproduced = !got || got->price != db_price;
    t.evidence = "after the next write a reader gets price " + (got ? std::to_string(got->price) : std::string("none")) +
                 ", the database holds " + std::to_string(db_price) + " (cache " +
                 (cached ? "v" + std::to_string(*cached) : std::string("empty")) + ", database v" + std::to_string(db) + ")";
    const long long backfills_refused = run.results[0].value("stale_sets_refused", 0LL);
    if (backfills_refused > 0) t.evidence += "; R's backfill was refused (its marker was gone)";
    const bool refused = run.results[1].value("repair_set_refused", false);
    if (refused) {
        const long long pttl = s.redis().command({"PTTL", run.key}).integer();
        t.evidence += "; the write's set was refused as stale, the deleted row is served for " +
                      std::to_string(pttl / 1000) + " s more (its TTL)";
    }
    t.metrics = {{"reader_price", got ? static_cast<double>(got->price) : -1},
                 {"db_price", static_cast<double>(db_price)},
                 {"cached_version", cached ? static_cast<double>(*cached) : -1},
                 {"db_version", static_cast<double>(db)},
                 {"backfills_refused", static_cast<double>(backfills_refused)},
                 {"repair_set_refused", refused ? 1.0 : 0.0}};
    return t;
}

struct Row {
    std::string protection;
    std::string strategy;
    std::string variant;
    Outcome expected;
};

std::vector<Row> rows() {
    std::vector<Row> all;
    for (const bool paused : {true, false}) {
        const std::string what = paused ? kPaused : kReset;
        const std::string v = paused ? "paused" : "reset";
        all.push_back({kRound1 + what, "WriteThrough", "round1 " + v, Outcome::Reproduced});
        for (const char* s : {"WriteThrough", "Lease"}) all.push_back({label(s, "None") + what, s, v, Outcome::Prevented});
    }
    return all;
}

void forced(DemoContext& ctx, const RaceCase& c) {
    ctx.progress(std::string(kScenario) + ": forced C11, remove + re-insert under a paused reader and a raw-SQL reset" +
                 (ctx.options().repeat > 1 ? " (x" + std::to_string(ctx.options().repeat) + " each)" : ""));
    for (const auto& r : rows()) {
        if (auto base = ctx.row(c, r.protection, Mode::Forced)) {
            record_forced(
                ctx, std::move(*base),
                [&](int) { return judge(ctx, run_actors(ctx, c, r.strategy, "None", r.variant, Setup{})); }, false);
        }
    }
}

}  // namespace

void add_race_c11() {
    add_actor_role("C11", actor);
    RaceCase c{kScenario, "C11",
               "the row is at v5 and R has read it; it is removed and inserted again before R's backfill (or reset "
               "by raw SQL while cached); then one more write",
               {"R: reads v5, stops at repo.after_db_read (or caches v5), backfills when let go",
                "W: removes the row and inserts it again while R is stopped (or resets it by raw SQL), then writes once"},
               "",
               {},
               forced,
               {}};
    for (const auto& r : rows()) c.rows.push_back({r.protection, Mode::Forced, r.expected});
    add_race(std::move(c));
}

}  // namespace lockstep::demo
