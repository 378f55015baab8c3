// What the races of the stale-cache scenario share (docs/races.md C1-C5, C8): the actors of a
// forced cache race, the run of one interleaving, and how its end state is judged. Each race is
// its own file (race_c1.cpp, ...); the scenario, its summary matrix and the load run are in
// scenario_stale_cache.cpp.
//
// Each actor (reader, writer) is a worker with its own CachedRepository, as separate application
// servers would be; an actor stopped at a fault point is released by the other once that one has
// finished its step or is waiting for the key's lock (its repository's lock_waits grew). After
// every actor and background delete is done, the cache is "stale" when it holds a version older
// than the database's.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "context.h"
#include "forced.h"
#include "lockstep/core/error.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/strategies/outbox.h"
#include "lockstep/strategies/strategies.h"
#include "product_repository.h"
#include "race_case.h"
#include "signals.h"
#include "thread_faults.h"
#include "workers.h"

namespace lockstep::demo::stale {

using Repo = CachedRepository<Product>;

inline constexpr const char* kScenario = "stale-cache";
inline constexpr std::chrono::seconds kStepTimeout{30};

// None, Mutex, ReadWrite.
const std::vector<std::string>& lock_modes();
// "WriteThenDelete x Mutex" (the strategy's table label).
std::string label(const std::string& strategy, const std::string& mode);
// 'F' (fresh) -> prevented; 'S' (stale until the TTL) and 'B' (stale, bounded) -> reproduced.
Outcome as_outcome(char c);

// Delegates to the real store; after arm(), the next remove or fill fails as a Redis timeout
// would. The retry queue then runs on the repository's scheduler thread, through this same
// store, and succeeds (C5).
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

// The outbox of the rows that show it closing C5: a writer's variant `kOutboxVariant` records a
// row per write; a live peer (the demo itself) replays rows older than the bound.
inline constexpr const char* kOutboxVariant = "crash+outbox";
inline OutboxOptions outbox_options() {
    return OutboxOptions{.bound = std::chrono::milliseconds(200), .replay_every = std::chrono::milliseconds(50)};
}

// One actor: its worker, the case's signal tag and product.
struct StaleActor {
    Worker& w;
    std::string tag;
    std::int64_t id;

    Signals& sig() const { return w.services.signals(); }
    void post(const std::string& s) const { sig().post(tag + ":" + s); }
    void await(const std::string& s) const;
    // A fault point action: say we are there, wait to be let go.
    fault::Action stop_at(const std::string& here, const std::string& go) const;
};

// Runs `body`; posts `go` as soon as `body` returned (after `then`) or `repo` started waiting
// for a key lock, whichever comes first.
void run_then_release(const StaleActor& a, Repo& repo, const std::string& go, const std::function<void()>& body,
                      const std::function<void()>& then = {});

nlohmann::json metrics_json(const RepositoryMetrics& m);

// What one actor's body runs with.
struct ActorEnv {
    Worker& w;
    StaleActor a;
    Repo& repo;
    FlakyStore* flaky;  // set for races registered with a flaky store (C5)
    nlohmann::json& out;
    std::string actor;    // "W1", "R", ...
    std::string variant;  // the row's variant ("crash", "authority", ...), or empty

    // Waits for the repository's background deletes.
    void settle() const;
    void set_price(std::int64_t price) const;
};
using ActorBody = std::function<void(ActorEnv&)>;

// Registers the worker role "stale.<race>": builds the actor's repository (over a FlakyStore when
// `flaky_store`), runs `body`, waits for its background deletes, returns `out` with its metrics.
void add_actor_role(const std::string& race, ActorBody body, bool flaky_store = false);

// How the product starts: stock, and whether the cache already holds v1.
struct Setup {
    bool cached_first = false;
    int stock = 10;
};

// One run of a forced cache race: the product, its cache key, each actor's result.
struct ForcedRun {
    std::int64_t id = 0;
    std::string key;
    std::vector<nlohmann::json> results;
};

// The actor names of a case's roles ("W1: commits v2 ..." -> "W1").
std::vector<std::string> actor_names(const RaceCase& c);
// Runs the actors of `c` (role "stale.<race>") on a fresh product.
ForcedRun run_actors(DemoContext& ctx, const RaceCase& c, const std::string& strategy, const std::string& mode,
                     const std::string& variant, Setup setup);
// Sum of one repository metric over the actors' results.
long long sum_metric(const ForcedRun& run, const std::string& name);
// The standard judgement: is the cache left stale (older than the database), bounded or not;
// `prefix` goes before the evidence.
Trial judge_freshness(DemoContext& ctx, const ForcedRun& run, const std::string& prefix = "");

// A race of the strategy x lock mode matrix: one forced row per strategy x lock mode; without a
// lock each strategy's outcome is `without_lock[strategy]` ('F', 'S' or 'B'), with Mutex or
// ReadWrite every strategy ends fresh (the lock keeps backfills and writes apart).
void add_matrix_race(std::string race, std::string forces, std::vector<std::string> roles, Setup setup,
                     std::map<std::string, char> without_lock);

}  // namespace lockstep::demo::stale
