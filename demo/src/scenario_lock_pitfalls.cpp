// lock-pitfalls (docs/races.md L1, L2, L3, L4, L5, L6, L10): the broken locks of the source documents
// (broken_locks.h, DEMO ONLY) each failing under a forced interleaving, beside lockstep's
// RedisMutex under the same interleaving.
//
// The actors A, B, C are workers (threads, or processes with --processes) that pace each other
// through Signals; "A pauses past its lease" means A waits until its key is really gone from
// Redis, so every run is deterministic and none relies on a sleep being long enough.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "broken_locks.h"
#include "context.h"
#include "forced.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/core/error.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/db/fenced_write.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/locks/lock_client.h"
#include "lockstep/locks/redis_mutex.h"
#include "products.h"
#include "scenarios.h"
#include "stats.h"
#include "thread_faults.h"
#include "workers.h"

namespace lockstep::demo {

namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr const char* kScenario = "lock-pitfalls";
constexpr auto kShortLease = 200ms;  // a lease that is meant to run out during the case
constexpr auto kLongLease = 10s;     // a lease that must not run out during the case
constexpr auto kRenewedLease = 500ms;  // L5: renewed every lease/3 by the watchdog
constexpr auto kSlowWork = 1200ms;    // L5: the holder's work, longer than its lease

// What an actor sees: its worker, the case's keys, and the signals it paces the others with.
struct Actor {
    Worker& w;
    std::string tag;
    std::string key;   // key of a broken lock
    std::string name;  // name of a RedisMutex
    std::int64_t product;

    Signals& sig() const { return w.services.signals(); }
    RedisClient& redis() const { return w.services.redis(); }
    void post(const std::string& s) const { sig().post(tag + ":" + s); }
    void await(const std::string& s, std::chrono::milliseconds timeout = 30s) const {
        if (!sig().wait(tag + ":" + s, timeout)) throw TimeoutError("actor waited in vain for '" + s + "'");
    }
    // "Paused past its lease": returns once `k` has really expired in Redis.
    void wait_until_gone(const std::string& k) const {
        const auto deadline = std::chrono::steady_clock::now() + 30s;
        while (redis().command({"EXISTS", k}).integer() != 0) {
            if (std::chrono::steady_clock::now() > deadline) throw TimeoutError("key " + k + " never expired");
            std::this_thread::sleep_for(5ms);
        }
    }
    // The unit of work the lock guards: one increment of the product's stock column.
    void write() const { w.services.db().execute("UPDATE products SET stock = stock + 1 WHERE id = ?", {product}); }
    // The same, refused by MySQL when `token` is older than one that already wrote the row.
    bool fenced_write(FenceToken token) const {
        FencedUpdate u;
        u.assignments = "stock = stock + 1";
        u.table = "products";
        try {
            fenced_update(w.services.db(), product, token, u);
            return true;
        } catch (const ConflictError&) {
            return false;
        }
    }
};

MutexOptions fixed_lease(std::chrono::milliseconds lease) {
    MutexOptions o;
    o.lease = lease;
    o.renew = false;
    return o;
}
MutexOptions renewed_lease(std::chrono::milliseconds lease) {
    MutexOptions o;
    o.lease = lease;
    return o;
}

// Unlocks, and says how it went: "ok", or the error's type.
std::string unlock_outcome(RedisMutex& m) {
    try {
        m.unlock_checked();
        return "ok";
    } catch (const LockLostError&) {
        return "LockLostError";
    } catch (const NotOwnerError&) {
        return "NotOwnerError";
    }
}

// ---- L1: SETNX, then EXPIRE -------------------------------------------------------------------

json l1_broken(Actor& a, const std::string& actor) {
    if (actor == "A") {
        broken::SetnxThenExpire lock(a.redis(), a.key, kShortLease);
        ThreadFault crash("demo.broken.after_setnx", [&] { a.w.crash(); });
        lock.try_lock();
        return {{"crashed", false}};  // not reached: the fault point crashed A
    }
    broken::SetnxThenExpire lock(a.redis(), a.key, kShortLease);
    auto t0 = std::chrono::steady_clock::now();
    bool got = false;
    while (!got && std::chrono::steady_clock::now() - t0 < 3 * kShortLease) {
        got = lock.try_lock();
        if (!got) std::this_thread::sleep_for(10ms);
    }
    long long pttl = a.redis().command({"PTTL", a.key}).integer();
    return {{"acquired", got}, {"waited_ms", ms_between(t0, std::chrono::steady_clock::now())}, {"pttl", pttl}};
}

json l1_library(Actor& a, const std::string& actor) {
    if (actor == "A") {
        // A process of its own dies with its watchdog; in a thread, a lock client of its own
        // destroyed without unlock is the same thing.
        std::shared_ptr<RedisLockClient> own = a.w.alone_in_process ? nullptr : a.w.services.new_lock_client();
        RedisMutex m(own ? *own : a.w.services.locks(), a.name, renewed_lease(kShortLease));
        m.lock();
        a.w.crash();
    }
    RedisMutex m(a.w.services.locks(), a.name, renewed_lease(kLongLease));
    auto t0 = std::chrono::steady_clock::now();
    bool got = m.try_lock_for(10 * kShortLease);
    double waited = ms_between(t0, std::chrono::steady_clock::now());
    if (got) m.unlock();
    return {{"acquired", got}, {"waited_ms", waited}};
}

Trial l1_trial(DemoContext& ctx, bool broken_lock, const json& base) {
    const std::string role_case = broken_lock ? "L1.broken" : "L1.library";
    json a = base, b = base;
    a["case"] = b["case"] = role_case;
    a["actor"] = "A";
    b["actor"] = "B";
    auto ra = run_workers(ctx, {{"pitfalls.actor", a}})[0];
    auto rb = run_workers(ctx, {{"pitfalls.actor", b}})[0];
    Trial t;
    bool crashed = ra.value("crashed", false);
    bool got = rb["acquired"].get<bool>();
    double waited = rb["waited_ms"].get<double>();
    t.reproduced = crashed && !got;
    if (broken_lock) {
        long long pttl = rb["pttl"].get<long long>();
        t.evidence = std::string("A crashed between SETNX and EXPIRE; B tried for ") + fixed1(waited) +
                     " ms (" + fixed1(waited / kShortLease.count()) + "x the " + std::to_string(kShortLease.count()) +
                     " ms TTL A meant to set): " + (got ? "got it" : "never got it") +
                     "; the key's TTL is " + (pttl == -1 ? "none (-1): it never expires" : std::to_string(pttl) + " ms");
        t.metrics = {{"b_acquired", got ? 1 : 0}, {"b_waited_ms", waited}, {"key_pttl", static_cast<double>(pttl)}};
        ctx.services().redis().del({base["key"].get<std::string>()});
    } else {
        t.evidence = std::string("A crashed holding the lock; B ") +
                     (got ? "got it after " + fixed1(waited) + " ms (lease " + std::to_string(kShortLease.count()) + " ms)"
                          : "never got it");
        t.metrics = {{"b_acquired", got ? 1 : 0}, {"b_waited_ms", waited}};
    }
    return t;
}

// ---- L2: SETNX + GETSET with the expiry in the value ---------------------------------------------

json l2(Actor& a, const std::string& actor, bool broken_lock) {
    if (broken_lock) {
        if (actor == "A") {
            broken::SetnxGetset lock(a.redis(), a.key, 2000ms);
            if (!lock.try_lock()) throw ConfigError("L2", "A could not take a free lock");
            a.post("a_held");
            a.await("b_done");
            bool still = lock.believes_held();
            lock.unlock();
            return {{"a_believes_held", still}};
        }
        a.await("a_held");
        // B's clock runs 5 s ahead (an unsynchronised host): A's lock looks expired to it.
        broken::SetnxGetset lock(a.redis(), a.key, 2000ms, 5000ms);
        bool got = lock.try_lock();
        a.post("b_done");
        return {{"acquired", got}};
    }
    if (actor == "A") {
        RedisMutex m(a.w.services.locks(), a.name, renewed_lease(2000ms));
        m.lock();
        a.post("a_held");
        a.await("b_done");
        bool still = m.held_by_this_thread() && !m.lost();
        m.unlock();
        return {{"a_believes_held", still}};
    }
    a.await("a_held");
    // B's clock is as wrong as above, but RedisMutex never reads a client clock: the lease is a
    // server-side TTL and the owner is in the hash.
    RedisMutex m(a.w.services.locks(), a.name, renewed_lease(2000ms));
    bool got = m.try_lock();
    if (got) m.unlock();
    a.post("b_done");
    return {{"acquired", got}};
}

// ---- L3 / L4 / L10: releasing what is no longer yours -------------------------------------------

// A takes a short lease and "pauses" until it has run out; B takes the lock; A releases (the
// wrong way, or through RedisMutex); C then tries to take it while B still believes it holds it.
json release_case(Actor& a, const std::string& actor, const std::string& kind, bool broken_lock) {
    using broken::TokenLock;
    const TokenLock::Release release = kind == "L3"   ? TokenLock::Release::Del
                                       : kind == "L4" ? TokenLock::Release::GetThenDel
                                                      : TokenLock::Release::CompareAndDeleteIgnored;
    if (actor == "A") {
        if (broken_lock) {
            TokenLock lock(a.redis(), a.key, kShortLease, release);
            if (!lock.try_lock()) throw ConfigError(kind, "A could not take a free lock");
            if (kind == "L4") {
                // A checks the owner (still A), then pauses before its DEL until B holds the lock.
                ThreadFault pause("demo.broken.between_get_and_del", [&] {
                    a.post("a_checked");
                    a.await("b_held");
                });
                lock.unlock();
            } else {
                a.wait_until_gone(a.key);
                a.post("a_checked");
                a.await("b_held");
                lock.unlock();  // L3: DEL of B's lock; L10: a silent "0"
            }
            a.post("a_released");
            return {{"a_unlock", "ok"}};
        }
        RedisMutex m(a.w.services.locks(), a.name, fixed_lease(kShortLease));
        m.lock();
        std::string outcome;
        if (kind == "L4") {
            // The library's check and delete are one script; A pauses just before it.
            ThreadFault pause("locks.mutex.before_release", [&] {
                a.post("a_checked");
                a.await("b_held");
            });
            outcome = unlock_outcome(m);
        } else {
            a.wait_until_gone(m.keys().mutex());
            a.post("a_checked");
            a.await("b_held");
            outcome = unlock_outcome(m);
        }
        a.post("a_released");
        return {{"a_unlock", outcome}};
    }
    if (actor == "B") {
        a.await("a_checked");
        if (broken_lock) {
            TokenLock lock(a.redis(), a.key, kLongLease, release);
            a.wait_until_gone(a.key);
            if (!lock.try_lock_for(10s)) throw ConfigError(kind, "B could not take the expired lock");
            a.post("b_held");
            a.await("c_done");
            bool intact = a.redis().get(a.key) == std::optional<std::string>(lock.token());
            a.redis().del({a.key});  // end of the case (not part of the timeline)
            return {{"b_lock_intact", intact}};
        }
        RedisMutex m(a.w.services.locks(), a.name, renewed_lease(kLongLease));
        a.wait_until_gone(m.keys().mutex());
        if (!m.try_lock_for(10s)) throw ConfigError(kind, "B could not take the expired lock");
        a.post("b_held");
        a.await("c_done");
        bool intact = m.held_by_this_thread() && !m.lost();
        std::string outcome = unlock_outcome(m);  // "ok" proves the hold was still B's in Redis
        return {{"b_lock_intact", intact && outcome == "ok"}};
    }
    // C
    a.await("a_released");
    std::string stranger_unlock;
    bool got = false;
    if (broken_lock) {
        TokenLock lock(a.redis(), a.key, kLongLease, release);
        got = lock.try_lock();
        if (!got && kind == "L10") {
            // A stranger's unlock: the compare-and-delete says 0 and nobody hears it.
            lock.unlock();
            stranger_unlock = "ok";
        }
    } else {
        RedisMutex m(a.w.services.locks(), a.name, renewed_lease(kLongLease));
        got = m.try_lock();
        if (got) {
            m.unlock();
        } else if (kind == "L10") {
            stranger_unlock = unlock_outcome(m);  // C never locked it: NotOwnerError, nothing sent
        }
    }
    a.post("c_done");
    return {{"c_acquired", got}, {"c_unlock", stranger_unlock}};
}

Trial release_trial(DemoContext& ctx, const std::string& kind, bool broken_lock, json base) {
    base["case"] = kind + (broken_lock ? ".broken" : ".library");
    std::vector<WorkerSpec> specs;
    for (const char* actor : {"A", "B", "C"}) {
        json args = base;
        args["actor"] = actor;
        specs.push_back({"pitfalls.actor", args});
    }
    auto r = run_workers(ctx, specs);
    const std::string a_unlock = r[0]["a_unlock"].get<std::string>();
    const bool b_intact = r[1]["b_lock_intact"].get<bool>();
    const bool c_got = r[2]["c_acquired"].get<bool>();
    const std::string c_unlock = r[2]["c_unlock"].get<std::string>();
    Trial t;
    t.metrics = {{"b_lock_intact", b_intact ? 1 : 0}, {"c_acquired", c_got ? 1 : 0},
                 {"a_unlock_silent", a_unlock == "ok" ? 1 : 0}};
    if (kind == "L10") {
        // Reproduced: an unlock of a lock one does not hold returned as if all was well.
        t.reproduced = a_unlock == "ok" || c_unlock == "ok";
        t.evidence = "A's unlock after its lease ran out: " + (a_unlock == "ok" ? std::string("returned silently") : a_unlock) +
                     "; stranger C's unlock: " + (c_unlock == "ok" ? std::string("returned silently") : c_unlock) +
                     "; B's lock " + (b_intact ? "intact" : "gone");
        t.metrics.push_back({"c_unlock_silent", c_unlock == "ok" ? 1 : 0});
        return t;
    }
    t.reproduced = c_got || !b_intact;
    std::string how;
    if (kind == "L3") {
        how = "A's lease ran out, B took the lock, A released it: ";
        how += a_unlock == "ok" ? "DEL removed B's lock" : a_unlock + ", nothing deleted";
    } else if (broken_lock) {
        how = "A's GET said 'mine', its lease ran out, B took the lock, A's DEL removed B's lock";
    } else {
        how = "A paused just before its release script, its lease ran out, B took the lock; the script found "
              "the hold not A's: " + a_unlock + ", nothing deleted";
    }
    t.evidence = how + "; C " + (c_got ? "took it too: B and C both hold it" : "could not take it: B still holds it alone");
    return t;
}

// ---- L5: a lease shorter than the work ------------------------------------------------------------

// Variants: "fixed" (fixed lease, no renewal), "slow" (renewed, holder's thread slow),
// "paused" (renewed, whole holder process paused), "fenced" (paused, writes fenced by MySQL).
json l5(Actor& a, const std::string& actor, const std::string& variant) {
    auto& sig = a.sig();
    if (actor == "A") {
        const bool own_process = a.w.alone_in_process;
        std::shared_ptr<RedisLockClient> own;
        if ((variant == "paused" || variant == "fenced") && !own_process) own = a.w.services.new_lock_client();
        RedisLockClient& client = own ? *own : a.w.services.locks();
        RedisMutex m(client, a.name, variant == "fixed" ? fixed_lease(kShortLease) : renewed_lease(kRenewedLease));
        m.lock();
        const FenceToken token = m.fence_token();
        bool wrote = false;
        if (variant == "fixed") {
            a.post("a_held");
            a.wait_until_gone(m.keys().mutex());  // a GC pause, a slow query: longer than the lease
            a.post("a_expired");
            a.await("b_done");
            a.write();
            wrote = true;
        } else if (variant == "slow") {
            a.post("a_held");
            std::this_thread::sleep_for(kSlowWork);  // longer than the lease; the watchdog renews meanwhile
            a.write();
            wrote = true;
        } else {
            // The whole process stops: its watchdog too. In a process of its own: SIGSTOP, and B
            // sends SIGCONT. In a thread: this lock client's watchdog is held at its renewal
            // fault point while the thread waits, which is what a stopped process looks like.
            if (own_process) {
                sig.put(a.tag + ":a_pid", std::to_string(::getpid()));
                a.post("a_held");
                ::raise(SIGSTOP);
            } else {
                fault::Gate frozen(60s);
                auto armed = fault::arm("locks.watchdog.before_renew", frozen.action());
                a.post("a_held");
                a.await("resume", 60s);
                frozen.open();
            }
            // A resumes and does its work, unaware that its lease ran out meanwhile.
            wrote = variant == "fenced" ? a.fenced_write(token) : (a.write(), true);
        }
        std::string outcome;
        try {
            outcome = unlock_outcome(m);
        } catch (const std::exception& e) {
            outcome = e.what();
        }
        return {{"a_wrote", wrote}, {"a_token", token}, {"a_unlock", outcome}};
    }
    // B
    a.await(variant == "fixed" ? "a_expired" : "a_held");
    // Whatever happens to B, a paused A is resumed at the end (else its process would stay stopped).
    struct Resume {
        Actor& a;
        bool needed;
        ~Resume() {
            if (!needed) return;
            try {
                if (auto pid = a.sig().get(a.tag + ":a_pid")) {
                    ::kill(static_cast<pid_t>(std::stoll(*pid)), SIGCONT);
                } else {
                    a.post("resume");
                }
            } catch (const std::exception&) {
            }
        }
    } resume{a, variant == "paused" || variant == "fenced"};
    RedisMutex m(a.w.services.locks(), a.name, renewed_lease(kLongLease));
    bool got;
    auto t0 = std::chrono::steady_clock::now();
    if (variant == "slow") {
        got = m.try_lock_for(kSlowWork - 400ms);  // well inside A's work
    } else {
        got = m.try_lock_for(30s);
    }
    double waited = ms_between(t0, std::chrono::steady_clock::now());
    bool wrote = false;
    FenceToken token = 0;
    if (got) {
        token = m.fence_token();
        wrote = variant == "fenced" ? a.fenced_write(token) : (a.write(), true);
        m.unlock();
    }
    if (variant == "fixed") a.post("b_done");
    return {{"b_acquired", got}, {"b_wrote", wrote}, {"b_token", token}, {"b_waited_ms", waited}};
}

Trial l5_trial(DemoContext& ctx, const std::string& variant, json base) {
    insert_product(ctx.services().db(), base["product"].get<std::int64_t>(), 0, "guarded counter");
    base["case"] = "L5." + variant;
    json a = base, b = base;
    a["actor"] = "A";
    b["actor"] = "B";
    auto r = run_workers(ctx, {{"pitfalls.actor", a}, {"pitfalls.actor", b}});
    const int writes = stock_of(ctx.services().db(), base["product"].get<std::int64_t>());
    const bool b_got = r[1]["b_acquired"].get<bool>();
    const bool a_wrote = r[0]["a_wrote"].get<bool>();
    Trial t;
    t.reproduced = writes > 1;
    t.metrics = {{"writes_applied", writes}, {"b_acquired", b_got ? 1 : 0}, {"a_write_applied", a_wrote ? 1 : 0},
                 {"b_waited_ms", r[1]["b_waited_ms"].get<double>()}};
    if (variant == "fixed") {
        t.evidence = "A paused past its " + std::to_string(kShortLease.count()) +
                     " ms lease, B took the lock and wrote, A woke and wrote: " +
                     std::to_string(writes) + " writes of the one-at-a-time work";
    } else if (variant == "slow") {
        t.evidence = "A worked " + std::to_string(kSlowWork.count()) + " ms on a " +
                     std::to_string(kRenewedLease.count()) + " ms lease; B " +
                     (b_got ? "got the lock" : "waited " + fixed1(r[1]["b_waited_ms"].get<double>()) + " ms in vain") +
                     " (the watchdog kept renewing); " + std::to_string(writes) + " write";
    } else if (variant == "paused") {
        t.evidence = "A's whole process paused (watchdog too); lease ran out, B took it after " +
                     fixed1(r[1]["b_waited_ms"].get<double>()) + " ms and wrote; A resumed and wrote: " +
                     std::to_string(writes) + " writes";
    } else {
        t.evidence = "A's process paused, B took the lock (token " + std::to_string(r[1]["b_token"].get<long long>()) +
                     ") and wrote; A's late write with token " + std::to_string(r[0]["a_token"].get<long long>()) +
                     (a_wrote ? " was applied" : " was refused by MySQL") + ": " + std::to_string(writes) + " write";
    }
    return t;
}

// ---- L6: not reentrant ------------------------------------------------------------------------

json l6(Actor& a, bool broken_lock) {
    if (broken_lock) {
        broken::TokenLock outer(a.redis(), a.key, kLongLease, broken::TokenLock::Release::Del);
        if (!outer.try_lock()) throw ConfigError("L6", "could not take a free lock");
        // A calls a function that takes the same lock: it waits for itself.
        broken::TokenLock inner(a.redis(), a.key, kLongLease, broken::TokenLock::Release::Del);
        auto t0 = std::chrono::steady_clock::now();
        bool got = inner.try_lock_for(500ms);
        double waited = ms_between(t0, std::chrono::steady_clock::now());
        outer.unlock();
        return {{"inner_acquired", got}, {"waited_ms", waited}, {"hold_count", got ? 2 : 1}};
    }
    RedisMutex outer(a.w.services.locks(), a.name, renewed_lease(kLongLease));
    outer.lock();
    RedisMutex inner(a.w.services.locks(), a.name, renewed_lease(kLongLease));
    auto t0 = std::chrono::steady_clock::now();
    bool got = inner.try_lock_for(1000ms);
    double waited = ms_between(t0, std::chrono::steady_clock::now());
    int count = outer.hold_count();
    if (got) inner.unlock();
    outer.unlock();
    return {{"inner_acquired", got}, {"waited_ms", waited}, {"hold_count", count}};
}

// ---- the role and the cases -----------------------------------------------------------------

json actor_role(Worker& w) {
    Actor a{w, w.args["tag"].get<std::string>(), w.args["key"].get<std::string>(), w.args["name"].get<std::string>(),
            w.args["product"].get<std::int64_t>()};
    const std::string c = w.args["case"].get<std::string>();
    const std::string actor = w.args["actor"].get<std::string>();
    const std::string kind = c.substr(0, c.find('.'));
    const std::string variant = c.substr(c.find('.') + 1);
    const bool broken_lock = variant == "broken";
    if (kind == "L1") return broken_lock ? l1_broken(a, actor) : l1_library(a, actor);
    if (kind == "L2") return l2(a, actor, broken_lock);
    if (kind == "L3" || kind == "L4" || kind == "L10") return release_case(a, actor, kind, broken_lock);
    if (kind == "L5") return l5(a, actor, variant);
    if (kind == "L6") return l6(a, broken_lock);
    throw ConfigError("case", "unknown lock pitfall case " + c);
}

struct Case {
    const char* race;
    const char* label;
    Outcome expected;
    std::function<Trial(DemoContext&, const json&)> trial;
};

Trial two_actors(DemoContext& ctx, json base, const std::string& c,
                 const std::function<Trial(const std::vector<json>&)>& judge) {
    base["case"] = c;
    json a = base, b = base;
    a["actor"] = "A";
    b["actor"] = "B";
    return judge(run_workers(ctx, {{"pitfalls.actor", a}, {"pitfalls.actor", b}}));
}

Trial l2_trial(DemoContext& ctx, const json& base, bool broken_lock) {
    return two_actors(ctx, base, broken_lock ? "L2.broken" : "L2.library", [&](const std::vector<json>& r) {
        Trial t;
        bool b_got = r[1]["acquired"].get<bool>();
        bool a_held = r[0]["a_believes_held"].get<bool>();
        t.reproduced = b_got && a_held;
        t.evidence = std::string("B's clock runs 5 s ahead; B ") +
                     (b_got ? "judged A's lock expired and took it over with GETSET" : "could not take A's lock") +
                     (a_held ? " while A still held it" : "") + (b_got && a_held ? ": two holders" : "");
        if (!broken_lock) t.evidence += " (server-side TTL, owner in the hash: no client clock involved)";
        t.metrics = {{"b_acquired", b_got ? 1 : 0}, {"a_still_held", a_held ? 1 : 0}};
        if (broken_lock) ctx.services().redis().del({base["key"].get<std::string>()});
        return t;
    });
}

Trial l6_trial(DemoContext& ctx, json base, bool broken_lock) {
    base["case"] = broken_lock ? "L6.broken" : "L6.library";
    base["actor"] = "A";
    auto r = run_workers(ctx, {{"pitfalls.actor", base}})[0];
    Trial t;
    bool got = r["inner_acquired"].get<bool>();
    double waited = r["waited_ms"].get<double>();
    t.reproduced = !got;
    t.evidence = got ? "the nested lock() by the holder returned in " + fixed2(waited) + " ms (hold count " +
                           std::to_string(r["hold_count"].get<int>()) + ")"
                     : "the holder's nested lock() waited " + fixed1(waited) +
                           " ms for itself and gave up (without a timeout: forever)";
    t.metrics = {{"inner_acquired", got ? 1 : 0}, {"waited_ms", waited}};
    return t;
}

const std::vector<Case>& cases() {
    using O = Outcome;
    static const std::vector<Case> all = {
        {"L1", "SETNX, then EXPIRE (demo-only v1)", O::Reproduced,
         [](DemoContext& c, const json& b) { return l1_trial(c, true, b); }},
        {"L1", "RedisMutex (one script, lease)", O::Prevented,
         [](DemoContext& c, const json& b) { return l1_trial(c, false, b); }},
        {"L2", "SETNX + GETSET expiry (demo-only v2)", O::Reproduced,
         [](DemoContext& c, const json& b) { return l2_trial(c, b, true); }},
        {"L2", "RedisMutex (server TTL + owner)", O::Prevented,
         [](DemoContext& c, const json& b) { return l2_trial(c, b, false); }},
        {"L3", "SET NX PX, release by DEL (demo-only)", O::Reproduced,
         [](DemoContext& c, const json& b) { return release_trial(c, "L3", true, b); }},
        {"L3", "RedisMutex (owner-checked release)", O::Prevented,
         [](DemoContext& c, const json& b) { return release_trial(c, "L3", false, b); }},
        {"L4", "GET == mine, then DEL (demo-only)", O::Reproduced,
         [](DemoContext& c, const json& b) { return release_trial(c, "L4", true, b); }},
        {"L4", "RedisMutex (check + delete in one script)", O::Prevented,
         [](DemoContext& c, const json& b) { return release_trial(c, "L4", false, b); }},
        {"L5", "RedisMutex, fixed lease, no renewal", O::Reproduced,
         [](DemoContext& c, const json& b) { return l5_trial(c, "fixed", b); }},
        {"L5", "RedisMutex + watchdog (holder slow)", O::Prevented,
         [](DemoContext& c, const json& b) { return l5_trial(c, "slow", b); }},
        {"L5", "RedisMutex + watchdog (process paused)", O::Reproduced,
         [](DemoContext& c, const json& b) { return l5_trial(c, "paused", b); }},
        {"L5", "watchdog + fencing token checked by MySQL", O::Prevented,
         [](DemoContext& c, const json& b) { return l5_trial(c, "fenced", b); }},
        {"L6", "SET NX PX lock (demo-only, not reentrant)", O::Reproduced,
         [](DemoContext& c, const json& b) { return l6_trial(c, b, true); }},
        {"L6", "RedisMutex (reentrant hold count)", O::Prevented,
         [](DemoContext& c, const json& b) { return l6_trial(c, b, false); }},
        {"L10", "compare-and-delete, 0 ignored (demo-only)", O::Reproduced,
         [](DemoContext& c, const json& b) { return release_trial(c, "L10", true, b); }},
        {"L10", "RedisMutex (NotOwnerError, LockLostError)", O::Prevented,
         [](DemoContext& c, const json& b) { return release_trial(c, "L10", false, b); }},
    };
    return all;
}

// Runs the forced rows of one race case: the rows of cases() with its id.
void run_rows(DemoContext& ctx, const RaceCase& rc) {
    for (const auto& c : cases()) {
        if (rc.race != c.race) continue;
        auto base = ctx.row(rc, c.label, Mode::Forced);
        if (!base) continue;
        record_forced(ctx, std::move(*base), [&](int) {
            const auto id = ctx.new_ids();
            const std::string name = "pit-" + std::to_string(id);
            json args = {{"tag", ctx.unique("pit")},
                         {"key", ctx.services().prefix() + "{" + name + "}:broken-lock"},
                         {"name", name},
                         {"product", id}};
            return c.trial(ctx, args);
        });
    }
}

// A race case of this scenario: its rows (and their expected outcomes) are those of cases().
void add_pitfall(const char* race, std::string forces, std::vector<std::string> roles) {
    RaceCase rc{kScenario, race, std::move(forces), std::move(roles), "", {}, run_rows, {}};
    for (const auto& c : cases()) {
        if (rc.race == c.race) rc.rows.push_back({c.label, Mode::Forced, c.expected});
    }
    add_race(std::move(rc));
}

}  // namespace

void add_lock_pitfalls() {
    add_scenario({kScenario,
                  "the source documents' broken Redis locks (demo-only code) fail under forced "
                  "interleavings; RedisMutex, its watchdog and fencing tokens hold under the same ones",
                  {}});
    roles()["pitfalls.actor"] = actor_role;
}

void add_race_l1() {
    add_pitfall("L1", "A takes the lock and crashes before its expiry is set; B tries for 3x the TTL A meant",
                {"A: takes the lock, crashes", "B: tries to take it"});
}
void add_race_l2() {
    add_pitfall("L2", "B's clock runs 5 s ahead; A holds the lock; B judges it expired",
                {"A: holds the lock", "B: fast clock, tries to take it over"});
}
void add_race_l3() {
    add_pitfall("L3", "A's lease runs out, B takes the lock, A releases it, C tries to take it",
                {"A: holder past its lease, releases", "B: the new holder", "C: a third client"});
}
void add_race_l4() {
    add_pitfall("L4", "A checks the lock is its own, pauses past its lease, B takes it, A deletes",
                {"A: checks, pauses, deletes", "B: the new holder", "C: a third client"});
}
void add_race_l5() {
    add_pitfall("L5",
                "A's work outlasts its lease: held slow (watchdog renews), its whole process paused (watchdog "
                "stopped too), and its late write fenced by MySQL",
                {"A: the holder, slow or paused", "B: takes the lock when A's lease runs out, writes"});
}
void add_race_l6() {
    add_pitfall("L6", "the holder calls lock() again on the same lock (a nested call)", {"A: the holder, nests"});
}
void add_race_l10() {
    add_pitfall("L10", "A unlocks after its lease ran out and B took the lock; stranger C unlocks too",
                {"A: holder past its lease, unlocks", "B: the new holder", "C: never held it, unlocks"});
}

}  // namespace lockstep::demo
