// Memory: what a held lock and a cached entry cost Redis, and what a hold and a pooled
// connection cost the client, each next to the smallest correct layout of the same data
// measured in the same run.
//
// Redis side: `MEMORY USAGE <key> SAMPLES 0` summed over every key under the lock's stem
// (SCAN <stem>*, so the figure follows whatever layout locks/ uses today), while the lock is
// held. Both are asked of the server that holds the key (on a cluster its slot's master: a
// lock's keys share its {name} hash tag, so SCAN of that one node finds them all; MEMORY and
// SCAN name no routable key, so RedisClient::command would send them to any master). The
// baseline keys share no hash tag, so each is deleted by its own DEL (one multi-key DEL would be
// CROSSSLOT on a cluster); the baseline keys are written by this file with key names of the same length, so key
// length is not what the comparison measures. Redis's own per-key bookkeeping (dictEntry, robj,
// the expires entry) is in both.
//
// Client side: glibc mallinfo2() (uordblks: bytes in use over all arenas) before and after N
// holds / connections, divided by N. Nothing else of the bench runs meanwhile (families run one
// after the other), but the lock client's background threads may allocate: the figure is a
// close estimate, not an exact count.
//
// Not a timing: each repetition measures once (Iterations(1)) and puts the bytes in counters.
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "families.h"
#include "lockstep/cache/redis_connection.h"
#include "lockstep/locks/lock_keys.h"
#include "lockstep/locks/redis_mutex.h"
#include "lockstep/locks/redis_read_write_lock.h"
#include "raw_redis.h"
#include "repositories.h"

namespace lockstep::bench {

namespace {

constexpr const char* kBench = "memory/redis_and_client";
constexpr int kWaiters = 4;
constexpr int kReaders = 3;
constexpr int kClientHolds = 64;
constexpr int kPoolConnections = 8;

// A command about `key` on the server that holds it (see the file comment).
RedisReply on_owner(RedisClient& redis, std::string_view key, std::initializer_list<std::string_view> args) {
    RedisReply r = redis.connection_for_key(key)->command(args);
    r.throw_if_error();
    return r;
}

long long memory_usage(RedisClient& redis, const std::string& key) {
    auto r = on_owner(redis, key, {"MEMORY", "USAGE", key, "SAMPLES", "0"});
    return r.is_nil() ? 0 : r.integer();
}

struct KeySet {
    long long bytes = 0;
    int keys = 0;
    std::string detail;  // "lock=72 fence=56"
};

// Every key starting with `stem` (a lock's keys all start with its "<prefix>{<name>}").
KeySet keys_under(RedisClient& redis, const std::string& stem) {
    KeySet out;
    std::string cursor = "0";
    std::vector<std::string> names;
    do {
        auto r = on_owner(redis, stem, {"SCAN", cursor, "MATCH", stem + "*", "COUNT", "1000"});
        cursor = r.elements().at(0).str();
        for (const auto& k : r.elements().at(1).elements()) names.push_back(k.str());
    } while (cursor != "0");
    std::sort(names.begin(), names.end());
    for (const auto& k : names) {
        const long long b = memory_usage(redis, k);
        out.bytes += b;
        ++out.keys;
        out.detail += (out.detail.empty() ? "" : " ") + k.substr(stem.size()) + "=" + std::to_string(b);
    }
    return out;
}

std::size_t heap_in_use() {
    return mallinfo2().uordblks;
}

// Zset members look like lockstep's owners: "<16 hex client id>:<thread>".
std::string owner_like(int i) {
    return "0123456789abcdef:" + std::to_string(i);
}

// Waits (up to 3 s) until `count()` reaches n; false if it did not.
template <class F>
bool wait_for(F count, long long n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (count() < n) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
}

}  // namespace

void register_memory(Environment& env, Plan& plan) {
    Environment* e = &env;
    auto repo = make_repository(env, std::make_shared<WriteThenDelete>());
    const std::int64_t id = new_products(env, 1);

    benchmark::RegisterBenchmark(kBench, [=](benchmark::State& state) {
        static std::atomic<int> round{0};
        const int n = round++;
        RedisClient& redis = e->redis();
        RedisLockClient& locks = e->locks();
        const std::string prefix = locks.options().prefix;
        auto name = [&](const char* what) { return "bench-mem-" + std::string(what) + "-" + std::to_string(n); };
        // A baseline key whose name has exactly the length of `like`.
        auto same_length = [&](const std::string& like) {
            std::string k = e->prefix() + "base:";
            k.resize(std::max(like.size(), k.size()), 'x');
            return k;
        };
        // Which keys made each figure (Google Benchmark's label: on the progress line).
        std::string label;
        for (auto _ : state) {
            try {
                // 1. An uncontended held mutex. Smallest correct layout: one string key, the owner
                // token as value, the lease as its TTL (SET key owner NX PX lease).
                {
                    RedisMutex m(locks, name("mutex"));
                    const std::string stem = LockKeys(prefix, m.name()).stem();
                    m.lock();
                    const KeySet held = keys_under(redis, stem);
                    m.unlock();
                    const KeySet after = keys_under(redis, stem);
                    const std::string base = same_length(LockKeys(prefix, m.name()).mutex());
                    redis.command({"SET", base, owner_like(1), "PX", "30000"});
                    state.counters["mutex_bytes"] = static_cast<double>(held.bytes);
                    state.counters["mutex_keys"] = held.keys;
                    state.counters["mutex_left_after_release_bytes"] = static_cast<double>(after.bytes);
                    state.counters["mutex_baseline_bytes"] = static_cast<double>(memory_usage(redis, base));
                    label = "mutex: " + held.detail + "; after release: " + after.detail;
                    redis.command({"DEL", base});
                }
                // 2. A held mutex with kWaiters waiters (other threads blocked in lock()). Smallest:
                // the string above plus one zset waiter -> deadline (arrival order and expulsion of
                // a dead waiter both come from the deadline when every waiter has the same timeout).
                {
                    RedisMutex holder(locks, name("waited"));
                    const LockKeys keys(prefix, holder.name());
                    const std::string stem = keys.stem();
                    holder.lock();
                    std::vector<std::thread> waiters;
                    std::atomic<int> errors{0};
                    // Waiters as other processes would queue: threads of one client with the
                    // local gate on would wait in this process, and only one would reach Redis.
                    LockClientOptions apart = locks.options();
                    apart.local_gate = false;
                    RedisLockClient waiting_client(redis, apart);
                    std::vector<std::unique_ptr<RedisMutex>> ms;
                    for (int i = 0; i < kWaiters; ++i) ms.push_back(std::make_unique<RedisMutex>(waiting_client, holder.name()));
                    for (int i = 0; i < kWaiters; ++i) {
                        waiters.emplace_back([&, i] {
                            try {
                                ms[static_cast<std::size_t>(i)]->lock();
                                ms[static_cast<std::size_t>(i)]->unlock();
                            } catch (const std::exception&) {
                                ++errors;
                            }
                        });
                    }
                    // The waiters are queued once the queue holds all of them (today's layout:
                    // the :lock:q zset); if the layout changes, the figure is taken after 3 s.
                    const bool queued = wait_for(
                        [&]() -> long long {
                            try {
                                return redis.command({"ZCARD", keys.mutex_queue()}).integer();
                            } catch (const std::exception&) {
                                return 0;  // another layout (not a zset): measured after the 3 s
                            }
                        },
                        kWaiters);
                    const KeySet held = keys_under(redis, stem);
                    holder.unlock();
                    for (auto& t : waiters) t.join();
                    const std::string base = same_length(keys.mutex());
                    const std::string base_q = same_length(keys.mutex_queue());
                    redis.command({"SET", base, owner_like(1), "PX", "30000"});
                    for (int i = 0; i < kWaiters; ++i)
                        redis.command({"ZADD", base_q, std::to_string(1'790'000'000'000LL + i), owner_like(i + 2)});
                    redis.command({"PEXPIRE", base_q, "60000"});
                    label += "; with waiters: " + held.detail;
                    state.counters["waited_bytes"] = static_cast<double>(held.bytes);
                    state.counters["waited_keys"] = held.keys;
                    state.counters["waited_queued"] = queued ? 1 : 0;
                    state.counters["waited_errors"] = errors.load();
                    state.counters["waited_baseline_bytes"] =
                        static_cast<double>(memory_usage(redis, base) + memory_usage(redis, base_q));
                    redis.command({"DEL", base});
                    redis.command({"DEL", base_q});
                }
                // 3. A read-write lock held by kReaders readers (threads). Smallest: one hash
                // reader -> its lease deadline, the key's TTL the latest of them.
                {
                    const std::string rw_name = name("rw");
                    const LockKeys keys(prefix, rw_name);
                    std::vector<std::unique_ptr<RedisReadWriteLock>> rws;
                    for (int i = 0; i < kReaders; ++i) rws.push_back(std::make_unique<RedisReadWriteLock>(locks, rw_name));
                    std::atomic<int> in{0}, errors{0};
                    std::atomic<bool> done{false};
                    std::vector<std::thread> readers;
                    for (int i = 0; i < kReaders; ++i) {
                        readers.emplace_back([&, i] {
                            try {
                                rws[static_cast<std::size_t>(i)]->lock_shared();
                                ++in;
                                while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
                                rws[static_cast<std::size_t>(i)]->unlock_shared();
                            } catch (const std::exception&) {
                                ++errors;
                                ++in;
                            }
                        });
                    }
                    wait_for([&] { return in.load(); }, kReaders);
                    const KeySet held = keys_under(redis, keys.stem());
                    done = true;
                    for (auto& t : readers) t.join();
                    const std::string base = same_length(keys.rw_readers());
                    for (int i = 0; i < kReaders; ++i)
                        redis.command({"HSET", base, owner_like(i), std::to_string(1'790'000'000'000LL + i)});
                    redis.command({"PEXPIRE", base, "30000"});
                    label += "; rw: " + held.detail;
                    state.counters["rw_bytes"] = static_cast<double>(held.bytes);
                    state.counters["rw_keys"] = held.keys;
                    state.counters["rw_errors"] = errors.load();
                    state.counters["rw_baseline_bytes"] = static_cast<double>(memory_usage(redis, base));
                    redis.command({"DEL", base});
                }
                // 4. A cached entry, against its raw payload under a key of the same length with
                // the same TTL: the difference is what the envelope costs Redis.
                {
                    redis.command({"DEL", repo->key_of(id)});
                    if (!repo->get(id)) throw Error("memory: product row missing");
                    const std::string key = repo->key_of(id);
                    const std::string bytes = redis.get(key).value_or("");
                    const auto entry = CacheEntry::decode(bytes);
                    if (!entry) throw Error("memory: the entry was not filled");
                    const std::string base = same_length(key);
                    redis.command({"SET", base, entry->payload, "PX", "3600000"});
                    const long long ours = memory_usage(redis, key);
                    const long long raw = memory_usage(redis, base);
                    state.counters["entry_bytes"] = static_cast<double>(ours);
                    state.counters["entry_baseline_bytes"] = static_cast<double>(raw);
                    state.counters["entry_value_length"] = static_cast<double>(bytes.size());
                    state.counters["entry_payload_length"] = static_cast<double>(entry->payload.size());
                    state.counters["entry_key_length"] = static_cast<double>(key.size());
                    redis.command({"DEL", base});
                }
                // 5. Client: heap per hold (a RedisMutex constructed, then locked), per pooled
                // connection (a RedisClient's connections opened by concurrent blocking commands),
                // and per bare hiredis connection (RawRedis), the least a connection can cost.
                {
                    std::vector<std::unique_ptr<RedisMutex>> ms;
                    ms.reserve(kClientHolds);
                    const std::size_t h0 = heap_in_use();
                    for (int i = 0; i < kClientHolds; ++i)
                        ms.push_back(std::make_unique<RedisMutex>(locks, name("client") + "-" + std::to_string(i)));
                    const std::size_t h1 = heap_in_use();
                    for (auto& m : ms) m->lock();
                    const std::size_t h2 = heap_in_use();
                    for (auto& m : ms) m->unlock();
                    ms.clear();
                    state.counters["client_object_bytes"] =
                        (static_cast<double>(h1) - static_cast<double>(h0)) / kClientHolds;
                    state.counters["client_hold_bytes"] =
                        (static_cast<double>(h2) - static_cast<double>(h1)) / kClientHolds;

                    RedisOptions o = e->redis_options();
                    o.pool_size = kPoolConnections;
                    const std::size_t c0 = heap_in_use();
                    auto client = std::make_unique<RedisClient>(o);
                    // The first connection, to the server the BLPOPs below use (on a cluster,
                    // the list's master: a PING would open one to any master).
                    const std::string empty_list = e->prefix() + "mem-empty-list";
                    client->command({"EXISTS", empty_list});
                    const std::size_t c1 = heap_in_use();
                    std::vector<std::thread> users;
                    for (int i = 0; i < kPoolConnections; ++i)
                        users.emplace_back([&] { client->command({"BLPOP", empty_list, "0.2"}); });
                    for (auto& t : users) t.join();
                    const std::size_t c2 = heap_in_use();
                    client.reset();
                    state.counters["client_first_connection_bytes"] = static_cast<double>(c1) - static_cast<double>(c0);
                    state.counters["client_pooled_connection_bytes"] =
                        (static_cast<double>(c2) - static_cast<double>(c1)) / (kPoolConnections - 1);
                    const std::size_t r0 = heap_in_use();
                    {
                        std::vector<std::unique_ptr<RawRedis>> raws;
                        for (int i = 0; i < kPoolConnections; ++i) {
                            raws.push_back(std::make_unique<RawRedis>(e->redis_options()));
                            raws.back()->command({"PING"});
                        }
                        state.counters["raw_connection_bytes"] =
                            (static_cast<double>(heap_in_use()) - static_cast<double>(r0)) / kPoolConnections;
                    }
                }
                state.SetLabel(label);
                state.SetIterationTime(1);
            } catch (const std::exception& ex) {
                state.SkipWithError(ex.what());
                break;
            }
        }
    })
        ->Iterations(1)
        ->UseManualTime()
        ->Repetitions(1);

    auto bytes = [](double b) { return fixed(b, 0) + " B"; };

    plan.add(row_order::kMemory, "memory: held mutex, uncontended (Redis)", "≤ 200 B", {kBench},
             [bytes](const Results& r) {
                 TableRow row;
                 const double ours = r.counter(kBench, "mutex_bytes");
                 const double base = r.counter(kBench, "mutex_baseline_bytes");
                 row.ours = bytes(ours) + " in " + fixed(r.counter(kBench, "mutex_keys"), 0) + " keys";
                 row.baseline = bytes(base) + " SET NX PX";
                 row.ratio = times(ours / base);
                 row.verdict = ours <= 200 ? Verdict::Met : Verdict::Missed;
                 row.notes = "MEMORY USAGE of every key under the lock's {name} while held (" +
                             bytes(ours - r.counter(kBench, "mutex_left_after_release_bytes")) +
                             " go with the hold); baseline: one string "
                             "key = owner token, lease as TTL (the smallest correct mutex; reentrancy counted "
                             "in the client); left in Redis after release: " +
                             bytes(r.counter(kBench, "mutex_left_after_release_bytes")) +
                             " (the fencing counter, which must outlive holds to stay monotonic)";
                 row.data = {{"ours_bytes", ours}, {"baseline_bytes", base},
                             {"after_release_bytes", r.counter(kBench, "mutex_left_after_release_bytes")}};
                 return row;
             });
    plan.add(row_order::kMemory + 1, "memory: held mutex + 4 waiters (Redis)", "shown", {kBench},
             [bytes](const Results& r) {
                 TableRow row;
                 const double ours = r.counter(kBench, "waited_bytes");
                 const double base = r.counter(kBench, "waited_baseline_bytes");
                 row.ours = bytes(ours) + " in " + fixed(r.counter(kBench, "waited_keys"), 0) + " keys";
                 row.baseline = bytes(base) + " string + 1 zset";
                 row.ratio = times(ours / base);
                 row.verdict = Verdict::Shown;
                 row.notes = "4 threads blocked in lock(); baseline: the held string + one zset waiter → deadline; " +
                             std::string(r.counter(kBench, "waited_queued") > 0 ? "all 4 were queued when measured"
                                                                                 : "NOT all 4 were queued after 3 s") +
                             "; pub/sub subscriptions of the waiters are not in MEMORY USAGE";
                 row.data = {{"ours_bytes", ours}, {"baseline_bytes", base}};
                 return row;
             });
    plan.add(row_order::kMemory + 2, "memory: read-write lock, 3 readers (Redis)", "shown", {kBench},
             [bytes](const Results& r) {
                 TableRow row;
                 const double ours = r.counter(kBench, "rw_bytes");
                 const double base = r.counter(kBench, "rw_baseline_bytes");
                 row.ours = bytes(ours) + " in " + fixed(r.counter(kBench, "rw_keys"), 0) + " keys";
                 row.baseline = bytes(base) + " 1 hash";
                 row.ratio = times(ours / base);
                 row.verdict = Verdict::Shown;
                 row.notes = "baseline: one hash reader → lease deadline, TTL on the key; ours includes the "
                             "fencing counter if the rw lock keeps one under the name";
                 row.data = {{"ours_bytes", ours}, {"baseline_bytes", base}};
                 return row;
             });
    plan.add(row_order::kMemory + 3, "memory: cached entry, envelope (Redis)", "≤ 16 B", {kBench},
             [bytes](const Results& r) {
                 TableRow row;
                 const double ours = r.counter(kBench, "entry_bytes");
                 const double base = r.counter(kBench, "entry_baseline_bytes");
                 const double value = r.counter(kBench, "entry_value_length");
                 const double payload = r.counter(kBench, "entry_payload_length");
                 const double key = r.counter(kBench, "entry_key_length");
                 row.ours = bytes(ours - payload - key) + " over payload+key";
                 row.baseline = bytes(base - payload - key) + " raw SET";
                 row.ratio = "+" + bytes(ours - base);
                 row.verdict = ours - base <= 16 ? Verdict::Met : Verdict::Missed;
                 row.notes = "MEMORY USAGE " + bytes(ours) + " for a " + fixed(payload, 0) + "-byte payload and a " +
                             fixed(key, 0) + "-byte key; the envelope is " + fixed(value - payload, 0) +
                             " bytes of the value; baseline: the bare payload SET under a key of the same length, "
                             "same TTL (the smallest layout: Redis's per-key overhead is in both); met when the "
                             "envelope adds ≤ 16 B to MEMORY USAGE";
                 row.data = {{"ours_bytes", ours}, {"baseline_bytes", base}, {"envelope_length", value - payload},
                             {"payload_length", payload}, {"key_length", key}};
                 return row;
             });
    plan.add(row_order::kMemory + 4, "memory: client heap per hold / per connection", "shown", {kBench},
             [bytes](const Results& r) {
                 TableRow row;
                 const double object = r.counter(kBench, "client_object_bytes");
                 const double hold = r.counter(kBench, "client_hold_bytes");
                 const double conn = r.counter(kBench, "client_pooled_connection_bytes");
                 const double raw = r.counter(kBench, "raw_connection_bytes");
                 row.ours = bytes(hold) + "/hold, " + bytes(conn) + "/conn";
                 row.baseline = bytes(raw) + "/bare hiredis conn";
                 row.ratio = times(conn / raw);
                 row.verdict = Verdict::Shown;
                 row.notes = "glibc mallinfo2 deltas: a RedisMutex object " + bytes(object) + ", locking it " +
                             bytes(hold) + " more (64 holds averaged; the least a hold needs: owner token + "
                             "fence + deadline, ~40 B); a pooled connection of RedisClient " + bytes(conn) +
                             " (7 averaged) against a bare redisConnect context " + bytes(raw) +
                             "; the first connection with the client itself " +
                             bytes(r.counter(kBench, "client_first_connection_bytes"));
                 row.data = {{"object_bytes", object}, {"hold_bytes", hold}, {"pooled_connection_bytes", conn},
                             {"raw_connection_bytes", raw}};
                 return row;
             });
}

}  // namespace lockstep::bench
