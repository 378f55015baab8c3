// Internals shared by RedisLockClient, RedisMutex and RedisReadWriteLock: the hold registry,
// the watchdog, the wait rooms, and the generic acquire / release flow that every lock side
// (the mutex, the fair mutex, the rw lock's read side, its write side) goes through.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "lockstep/cache/redis_client.h"
#include "lockstep/core/mutex.h"
#include "lockstep/locks/lock_client.h"
#include "hold_table.h"     // locks_detail::OwnerKey: who a hold belongs to, as on every backend
#include "hold_timer.h"
#include "wait_rooms.h"
#include "hold_validity.h"  // locks_detail::valid_until_from: the validity every backend keeps
#include "lockstep/locks/hold.h"
#include "local_gate.h"
#include "lock_log.h"

namespace lockstep {

// A duration as a script argument: whole milliseconds.
inline std::string ms(std::chrono::milliseconds d) { return std::to_string(d.count()); }

using SteadyClock = std::chrono::steady_clock;
using SteadyTime = SteadyClock::time_point;

enum class AttemptStatus { Busy = 0, Reentered = 1, Acquired = 2, Lost = -2, UpgradeRefused = -3 };

struct AttemptResult {
    AttemptStatus status = AttemptStatus::Busy;
    // Acquired: the fencing token (0 where the side has none). Busy: re-check after this many ms.
    long long value = 0;
    // Busy, for a queued waiter: its arrival score, to pass back on later tries.
    std::string queue_score;
    // Acquired: the server's clock at the grant (TIME in the script), µs since 1970; 0: not sent.
    long long granted_at_us = 0;
};

// What a waiting acquirer tells the acquire script.
struct WaitTicket {
    std::string waiter_id;        // "<client id>:w<n>"
    std::string queue_score;      // "" on the first try
    long long wait_left_ms = -1;  // -1: unbounded
};

// One script call sent in a pipeline with others: a renewal by the watchdog, or the release of a
// hold still held when the client is destroyed.
struct ScriptCall {
    const RedisScript* script = nullptr;
    std::vector<std::string> keys;
    std::vector<std::string> args;
};

// Sends `calls` as EVALSHAs in one pipeline and returns one reply per call. A call answered
// NOSCRIPT (after SCRIPT FLUSH or a server restart) is sent again with eval(), which loads the
// script, and its reply replaced. Throws what the pipeline or that eval() throws.
std::vector<RedisReply> run_pipelined(RedisClient& redis, const std::vector<ScriptCall>& calls);

// Fault point names of one side (static strings: fault::point must stay cheap when disarmed).
struct SideFaultPoints {
    const char* before_acquire;
    const char* after_acquire;
    const char* before_release;
    const char* after_release;
};

// Who a message on a wait channel wakes. B5: anything else on the channel is ignored.
enum class WakeRule {
    NamedWaiter,  // mutex: a release names the one waiter it chose ("<client id>:w<n>")
    Broadcast,    // rw lock: 'r', 'w' or 'l' wakes every waiter of the name on this client
    // fair mutex: "<waiter id> <token>" makes that waiter the holder without a script of its
    // own (the release granted it the lock); the waiter id is its hold's owner value. A grant
    // for a waiter no longer here is undone by the watchdog (LockSide::undo_grant).
    Grant,
};

struct HoldSettings {
    std::chrono::milliseconds lease{30000};
    bool renew = true;
    std::function<void(const LockLoss&)> on_lost;
    std::optional<std::chrono::milliseconds> max_hold;  // LockOptions::max_hold
};

// One acquirable side of a lock, built once per lock object (its keys, channel and
// fixed arguments are strings made at construction, not at every call) and immutable after, so
// threads share it and a hold keeps it alive (the watchdog builds its renewal from it).
class LockSide {
public:
    explicit LockSide(HoldSettings settings) : settings_(std::move(settings)) {}
    virtual ~LockSide() = default;
    // The lock object's lease, renewal and loss callback, chosen once.
    const HoldSettings& settings() const noexcept { return settings_; }
    virtual const char* kind() const = 0;  // "mutex", "read", "write"
    virtual const SideFaultPoints& fault_points() const = 0;
    virtual const std::string& name() const = 0;
    // The key a hold of this side lives in; with the owner it identifies the hold.
    virtual const std::string& hold_key() const = 0;
    // The hold key of the other side of the same lock (a read-write lock's writer for its read
    // side, and the reverse); empty for a mutex. A thread's holds of both sides share one owner
    // value, which the scripts compare (a writer's downgrade to a read hold).
    virtual std::string sibling_hold_key() const { return {}; }
    // Channel this client listens on while waiting.
    virtual const std::string& wait_channel() const = 0;
    // Runs the acquire script. `ticket` is null for a first try without waiting.
    virtual AttemptResult attempt(const std::string& owner, std::chrono::milliseconds lease, bool expect_held,
                                  const WaitTicket* ticket) const = 0;
    // A waiter that gives up withdraws (queue entry, writer claim). Best effort.
    virtual void leave(const std::string& owner, const WaitTicket& ticket) const = 0;
    // Runs the release script: 0 not held by owner, 1 still held (reentrant), 2 released.
    virtual int release(const std::string& owner, bool last) const = 0;
    virtual ScriptCall renew_call(const std::string& owner, std::chrono::milliseconds lease) const = 0;
    // The last release of owner's hold, as the client sends it when it is destroyed.
    virtual ScriptCall release_call(const std::string& owner) const = 0;
    virtual WakeRule wake_rule() const = 0;
    // The local gate threads of this client pass before they acquire this side afresh (docs/
    // locks.md "The local gate"); null: none (read-write lock sides, the fair mutex,
    // LockClientOptions::local_gate off), every thread goes to Redis itself.
    virtual LocalGate* gate() const { return nullptr; }

    // The hooks of a variant (the fair mutex overrides them; the defaults are the barging
    // sides'). The owner value of a new hold, from "<owner key>:<hold number>".
    virtual std::string owner_value(std::string owner) const { return owner; }
    // Gives back what an acquisition by `owner` may have taken: its reply was lost (a connection
    // error after the script was sent) or came after its validity (L11, late_grant.h).
    virtual void give_back(const std::string& owner) const { release(owner, true); }
    // The longest a queued waiter sleeps before its next try; unset: claim_refresh.
    virtual std::optional<std::chrono::milliseconds> recheck_limit() const { return std::nullopt; }
    // How long the side's wait room keeps its subscription after its last waiter left.
    virtual std::chrono::milliseconds room_linger() const { return std::chrono::milliseconds(0); }
    // WakeRule::Grant. L12: a grant of `token` to waiter `waiter` (its owner value) is confirmed
    // by a renewal of the holder's own before it is a hold; returns the hold's owner value then,
    // nothing when the grant is not (or no longer) the waiter's.
    virtual std::optional<std::string> confirm_grant(const std::string& /*waiter*/, FenceToken /*token*/) const {
        return std::nullopt;
    }
    // WakeRule::Grant: a grant that reached this client for a waiter it no longer has, undone (or
    // handed to another waiter of this client). Never throws.
    virtual void undo_grant(const std::string& /*waiter*/, FenceToken /*token*/) const noexcept {}
    // The reply of a release_call() sent in a pipeline (max_hold, close()): a fair release may
    // return a grant for a waiter of this client, handed over here. Never throws.
    virtual void released(const RedisReply& /*reply*/) const noexcept {}

private:
    HoldSettings settings_;
};

// "redis mutex", "redis read", "redis write": the tag of the lock log lines (lock_log.h).
inline std::string log_tag(const LockSide& side) { return std::string("redis ") + side.kind(); }
using locks_detail::elapsed_ms;
using locks_detail::lock_log;

using locks_detail::OwnerKey;

// One owner's hold of one lock side (a thread's, or a movable Hold's), as this process sees it. Its name, key, kind, calls and
// callback come from the side (shared, built once per lock object, not copied per hold).
struct RedisHold {
    std::shared_ptr<const LockSide> side;
    std::string owner;
    std::chrono::milliseconds lease{0};
    bool renew = true;

    // Guarded by Impl::mutex.
    int count = 0;
    FenceToken token = 0;
    long long granted_at_us = 0;  // the server's clock at the grant (µs since 1970); 0: unknown
    SteadyTime valid_until;  // conservative: measured from before the acquire/renewal was sent
    SteadyTime next_check;   // watchdog: next renewal (renew) or the lease end (fixed lease)
    SteadyTime cap = SteadyTime::max();  // max_hold: the watchdog ends the hold then
    bool lost = false;
    LockLossReason loss_reason = LockLossReason::Expired;  // set with `lost`
    bool movable = false;  // owned by a movable Hold: released once, no absorbed second unlock
    // Requested by report() when the hold is lost (not under the mutex: a stop callback may call
    // back into the client), for a movable Hold's stop_token(). A thread's hold has no stop
    // state (nothing reads it; its allocation would be a cost on every lock()).
    std::stop_source stop{std::nostopstate};
    // When the hold ends unless a renewal extends its validity first.
    SteadyTime ends_at() const { return std::min(valid_until, cap); }
    bool active = true;  // false once unlocked or forgotten: late renewal results are ignored
    SteadyTime acquired_at{};  // stats.hold_time
    // The local gate this hold keeps for its whole life (empty without a gate); left when the
    // hold is forgotten (forget(): released, found lost at unlock, failed release, closed client).
    GatePass gate_pass;
};

struct RedisLockClient::Impl : std::enable_shared_from_this<RedisLockClient::Impl> {
    Impl(RedisClient& redis, LockClientOptions options);
    ~Impl();

    void start();  // starts the watchdog (needs shared_from_this)
    // Destruction of the RedisLockClient: stops the watchdog, releases and reports every live
    // hold, wakes every waiter (LockClientClosedError), waits until no call uses `redis` any
    // more, and drops the subscriptions. Afterwards nothing here touches `redis`.
    void close() EXCLUDES(mutex);
    // The stages of close(): the holds still held, then the subscriptions.
    void release_live_holds_at_close() EXCLUDES(mutex);
    void drop_subscriptions();

    // The generic flows. `deadline` unset: one attempt, no waiting; SteadyTime::max(): forever.
    // `owner`: the calling thread, or a movable Hold; `acquired` (if given) receives the new
    // hold (not set by a re-entry).
    bool acquire(const std::shared_ptr<const LockSide>& side, std::optional<SteadyTime> deadline,
                 OwnerKey owner = OwnerKey::this_thread(), std::shared_ptr<RedisHold>* acquired = nullptr)
        EXCLUDES(mutex);
    // `checked`: LockLostError for a lost hold, the Redis error for a failed release. Otherwise
    // both are reported (log, counters, on_lost) and nothing is thrown but NotOwnerError.
    void release(const LockSide& side, bool checked, OwnerKey owner = OwnerKey::this_thread()) EXCLUDES(mutex);
    // A movable hold (lockstep/locks/hold.h) of `side`: acquire() for an owner of its own. An
    // empty Hold when `deadline` passed.
    lockstep::Hold acquire_movable(const std::shared_ptr<const LockSide>& side, std::optional<SteadyTime> deadline);

    // The stages of acquire, each with its invariant where it is defined.
    struct Acquisition;
    bool acquire_stages(Acquisition& a, std::optional<SteadyTime> deadline);
    bool reenter(Acquisition& a, const std::shared_ptr<RedisHold>& held);
    bool pass_gate(Acquisition& a, LocalGate& gate, std::optional<SteadyTime> deadline, GatePass& pass,
                   bool& seized);
    bool acquire_fresh(Acquisition& a, std::optional<SteadyTime> deadline);
    bool try_fresh(Acquisition& a, const WaitTicket* ticket, AttemptResult& out);
    // L11 (late_grant.h): an acquisition whose reply came back after its validity ended is
    // given back (the release script deletes only this owner's hold) and counted. Never throws.
    void give_back_late_grant(const LockSide& side, const std::string& owner) noexcept;
    // `value`: the hold's owner value when it is not a.owner (a fair grant's "<waiter>#<token>").
    void register_hold(Acquisition& a, SteadyTime sent, const AttemptResult& granted, std::string_view value = {});
    bool wait_for_turn(Acquisition& a, SteadyTime deadline);
    // WakeRule::Grant: the waiter was granted the lock with `token` by message; true once the
    // grant is confirmed (L12) and registered as its hold.
    bool take_grant(Acquisition& a, FenceToken token);
    // True when another thread of this client already listens on `channel` (it waits there).
    bool listening_on(const std::string& channel);

    // The stages of release, each with its invariant where it is defined (redis_release.cpp).
    struct Release;
    bool find_release_target(Release& rel, bool& client_closed) EXCLUDES(mutex);
    // A last release of a hold that was lost: reported once, thrown if checked.
    void end_lost_hold(Release& rel, LockLossReason reason, const char* why) EXCLUDES(mutex);
    // max_hold: true when the hold was ended by its cap (reported now if the watchdog has not
    // got to it yet); its release is then a last release and a loss. Also notes rel.lost_before.
    bool past_cap(Release& rel) EXCLUDES(mutex);
    // A release that failed (`failure`) of a hold already lost or past its validity: reported
    // as the loss it is; true when it was (then a checked unlock threw LockLostError).
    bool lost_before_failed_release(Release& rel, const std::exception& failure) EXCLUDES(mutex);
    void count_down(Release& rel) EXCLUDES(mutex);
    void forget(Release& rel) EXCLUDES(mutex);
    LockLostError lost_error(Release& rel) EXCLUDES(mutex);

    // One call that may use `redis`: refused once the client is closed; close() waits for the
    // calls under way.
    class Use {
    public:
        explicit Use(Impl& impl);  // throws LockClientClosedError once closed
        ~Use();
        Use(const Use&) = delete;
        Use& operator=(const Use&) = delete;

    private:
        Impl& impl_;
    };

    std::string owner_of_this_thread() const;
    std::string owner_of(OwnerKey owner) const;
    // Numbers the holds of this client (their owner values: "<owner key>:<n>").
    std::atomic<std::uint64_t> hold_numbers{0};
    std::shared_ptr<RedisHold> find_hold(const std::string& key, const std::string& owner) const EXCLUDES(mutex);

    RedisClient& redis;
    LockClientOptions options;
    std::string id;
    bool eviction_possible = false;  // set once, before start()
    // The local gates, one per mutex key (docs/locks.md "The local gate"); after `options`.
    LocalGateTable gates;

    struct Stats {
        std::atomic<std::uint64_t> acquire_attempts{0}, acquired{0}, wakeups{0}, renew_batches{0},
            renewals{0}, losses{0}, unlocks_of_lost_holds{0}, unlock_errors{0}, gate_waits{0},
            late_grants{0};  // acquisitions whose reply came after their validity (given back)
        LatencyHistogram acquire_latency, hold_time;  // LockClientStats
    } stats;

    // ---- registry and watchdog
    mutable Mutex mutex;
    bool closed GUARDED_BY(mutex) = false;    // guarded by `mutex`: the RedisLockClient is gone
    int calls_in_use GUARDED_BY(mutex) = 0;   // guarded by `mutex`: live Use objects
    CondVar calls_done_cv;
    // The watchdog: renews holds when they are due (watchdog_pass). A new hold wakes it only if
    // it needs an earlier check than planned, so an acquisition does not cost a context switch.
    locks_detail::HoldTimer watchdog{locks_detail::HoldTimer::kNoMaxSleep};
    // L11: reports a hold lost at its valid_until (expiry_pass), while the watchdog may be stuck
    // in a renewal into a partition for its socket timeout.
    locks_detail::HoldTimer expiry{locks_detail::HoldTimer::kNoMaxSleep};
    std::map<std::string, std::shared_ptr<RedisHold>> holds GUARDED_BY(mutex);  // key '\n' owner -> hold
    // Holds whose unlock threw LockLostError: one more unlock by the same thread is absorbed
    // (the std guard's destructor after an explicit guard.unlock() in a try block).
    std::set<std::string> absorb_one_unlock GUARDED_BY(mutex);

    // Marks a hold lost (under `mutex`); returns the loss to report, or nothing if it already was.
    std::optional<LockLoss> mark_lost_locked(RedisHold& hold, LockLossReason reason, std::string message) REQUIRES(mutex);
    void report(const std::shared_ptr<RedisHold>& hold, const LockLoss& loss) EXCLUDES(mutex);
    // The timers' passes: each acts on what is due and returns when it looks next.
    SteadyTime watchdog_pass() EXCLUDES(mutex);
    SteadyTime expiry_pass() EXCLUDES(mutex);
    SteadyTime earliest_check_locked() const REQUIRES(mutex);
    // Stops and joins the watchdog and the expiry thread (idempotent).
    void join_threads() EXCLUDES(mutex);
    void renew_batch(std::vector<std::shared_ptr<RedisHold>> due) EXCLUDES(mutex);
    // max_hold: gives back holds the watchdog found at their cap (reported lost already).
    void end_capped(const std::vector<std::shared_ptr<RedisHold>>& capped) EXCLUDES(mutex);

    // ---- waiting (wait_rooms.h: one subscription per wait channel, shared by this client's waiters)
    WaitRooms rooms;
    Mutex listener_mutex;
    bool reconnect_listener_added GUARDED_BY(listener_mutex) = false;
    std::atomic<std::uint64_t> reconnect_listener{0};
    // L8, Sentinel: the master-change listener (failover_watch.h) and when it last fired
    // (steady clock ticks; min: never). A new hold sent before that moment is not kept.
    std::uint64_t master_change_listener = 0;
    std::atomic<SteadyClock::rep> last_master_change{SteadyClock::time_point::min().time_since_epoch().count()};
    std::atomic<std::uint64_t> next_waiter{1};

    // Subscribes (first waiter of this client on the side's channel) and returns after the
    // server confirmed, so a release published afterwards reaches the waiter (L7).
    std::shared_ptr<WaitRoom> join_room(const std::shared_ptr<const LockSide>& side, RoomWaiter& waiter)
        EXCLUDES(listener_mutex);
    // The wake rule of a message on a wait channel (B5: anything else wakes nobody).
    static void on_message(WaitRoom& room, const std::shared_ptr<const LockSide>& side, std::string_view message,
                           Impl* impl);
    // WakeRule::Grant: a grant a script returned to this client instead of publishing it, handed
    // to the named waiter on `channel`; false when this client has no such waiter.
    bool grant_in_process(const std::string& channel, std::string_view waiter, FenceToken token);
    static bool grant_locked(WaitRoom& room, std::string_view waiter, FenceToken token) REQUIRES(room.mutex);
    // Grants that reached this client for waiters it no longer has; undone by the watchdog.
    struct OrphanGrant {
        std::shared_ptr<const LockSide> side;
        std::string waiter;
        FenceToken token = 0;
    };
    Mutex orphans_mutex;
    std::vector<OrphanGrant> orphan_grants GUARDED_BY(orphans_mutex);
    // The watchdog's work on the rooms: orphan grants undone, idle rooms dropped. Returns when it
    // looks next (a lingering room: within a second).
    SteadyTime rooms_pass() EXCLUDES(orphans_mutex);
    void wake_everyone();
    bool is_closed() const EXCLUDES(mutex);
};

std::string hold_id(const std::string& key, const std::string& owner);

// The array every acquire script returns: {status, value[, queue score]} (busy), {2, token[, the
// server's clock at the grant in µs]} (acquired).
AttemptResult parse_attempt(const RedisReply& reply);

// The calling thread's hold of `key`, as a copy (for lost(), hold_count(), fence_token()).
struct HoldView {
    bool exists = false;
    int count = 0;
    FenceToken token = 0;
    bool lost = false;  // known lost, or its lease has run out without a renewal (client clock)
};
HoldView view_hold(const RedisLockClient::Impl& impl, const std::string& key);

}  // namespace lockstep
