// The hold registry, its expiry thread, and the acquire / release flow the backends share.
#include "hold_table.h"

#include <random>
#include <utility>
#include <thread>

#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"
#include "lockstep/locks/lock_errors.h"
#include "lock_log.h"
#include "loss_report.h"

namespace lockstep::locks_detail {

namespace {

std::string_view kind_name(HoldKind kind) {
    switch (kind) {
    case HoldKind::Mutex: return "mutex";
    case HoldKind::Write: return "write";
    case HoldKind::Read: return "read";
    }
    return "mutex";
}

// "mysql mutex", "zookeeper read", ...: the second tag of every lock log line.
std::string log_tag(const HoldBackend& backend, HoldKind kind) {
    return std::string(backend.backend_name()) + " " + std::string(kind_name(kind));
}

}  // namespace

// One sequence for threads and movable holds: an owner number is never anybody else's.
std::atomic<std::uint64_t> next_owner_number{1};

std::uint64_t this_thread_number() {
    thread_local const std::uint64_t mine = next_owner_number.fetch_add(1);
    return mine;
}

OwnerKey OwnerKey::new_movable() { return {next_owner_number.fetch_add(1), true}; }

std::string random_hex_id() {
    thread_local std::mt19937_64 rng = [] {
        std::random_device rd;
        std::seed_seq seq{rd(), rd(), rd(), rd()};
        return std::mt19937_64(seq);
    }();
    static const char* digits = "0123456789abcdef";
    std::string s(32, '0');
    for (auto& c : s) c = digits[rng() & 15];
    return s;
}

HoldTable::HoldTable(std::string service_id, std::function<void(const LockLoss&)> service_on_lost,
                     HoldBackend& backend)
    : id_(std::move(service_id)), service_on_lost_(std::move(service_on_lost)), backend_(backend) {
    expiry_.start_lazily([this] { return expiry_pass(); });
}

LockLossReason HoldTable::end_reason(const Hold& hold, SteadyTime now) {
    if (now >= hold.cap) return LockLossReason::MaxHoldReached;
    return hold.renew ? LockLossReason::Unreachable : LockLossReason::LeaseEnded;
}

HoldTable::~HoldTable() { stop_expiry(); }

void HoldTable::stop_expiry() { expiry_.stop(); }

void HoldTable::extend(Hold& hold, SteadyTime sent) { extend_validity(hold.valid_until, valid_until_from(sent, hold.lease)); }

// L11: a hold whose validity ran out unextended is reported at that instant, not when the
// backend's renewal (which may hang for its socket timeout) gives up. One pass of the expiry
// timer: reports what is due, returns when the next hold ends.
SteadyTime HoldTable::expiry_pass() {
    const SteadyTime now = SteadyClock::now();
    SteadyTime next = SteadyTime::max();
    std::vector<std::shared_ptr<Hold>> due, capped;
    {
        MutexLock g(mu_);
        for (const auto& [k, h] : holds_) {
            if (h->lost.load()) continue;
            const SteadyTime v = h->ends_at();
            if (h->cap <= now) capped.push_back(h);
            else if (v <= now) due.push_back(h);
            else next = std::min(next, v);
        }
    }
    // max_hold: reported first (lost() and the stop token turn at the cap), then given back, so
    // the server frees the lock now rather than a lease later (or never: a ZooKeeper node or an
    // in-memory hold has no lease). The owner's release then finds it lost and reports that.
    for (const auto& h : capped) report_lost(h, LockLossReason::MaxHoldReached, "max_hold reached: the hold was ended");
    for (const auto& h : capped) backend_.abandon(*h);
    for (const auto& h : due) {
        if (h->renew) {
            report_lost(h, LockLossReason::Unreachable, "its validity ended: no renewal was acknowledged within the lease");
        } else {
            report_lost(h, LockLossReason::LeaseEnded, "fixed lease ran out before unlock");
        }
    }
    return next;
}

HoldTable::Key HoldTable::key_of(const std::string& name, HoldKind kind, OwnerKey owner) {
    return {name, static_cast<int>(kind), owner.number};
}

std::shared_ptr<Hold> HoldTable::find(const std::string& name, HoldKind kind, OwnerKey owner) const {
    MutexLock g(mu_);
    auto it = holds_.find(key_of(name, kind, owner));
    return it == holds_.end() ? nullptr : it->second;
}

int HoldTable::count(const std::string& name, HoldKind kind) const {
    auto h = find(name, kind);
    return h ? h->count : 0;
}

bool HoldTable::lost(const std::string& name, HoldKind kind) const {
    auto h = find(name, kind);
    return h && h->lost_or_expired();
}

FenceToken HoldTable::token(const std::string& name, HoldKind kind) const {
    auto h = find(name, kind);
    if (!h) throw NotOwnerError("lock '" + name + "': fence_token() by a thread that does not hold it");
    return h->token;
}

std::vector<std::shared_ptr<Hold>> HoldTable::all() const {
    MutexLock g(mu_);
    std::vector<std::shared_ptr<Hold>> out;
    out.reserve(holds_.size());
    for (const auto& [k, h] : holds_) out.push_back(h);
    return out;
}

void HoldTable::throw_closed() const {
    throw LockClientClosedError("lock service " + id_ + " was destroyed; make locks from a live service");
}

void HoldTable::throw_if_closed() const {
    if (closed_.load()) throw_closed();
}

void HoldTable::close(HoldBackend& backend) {
    std::vector<std::shared_ptr<Hold>> open;
    {
        MutexLock g(mu_);
        if (closed_.exchange(true)) return;
        for (const auto& [k, h] : holds_) {
            if (!h->lost.load()) open.push_back(h);
        }
    }
    stop_expiry();
    // Reported before they are given back: lost() is true before anyone else can get the lock.
    for (const auto& h : open) report_lost(h, LockLossReason::ClientClosed, "the lock service was destroyed");
    for (const auto& h : open) backend.abandon(*h);
}

bool HoldTable::lock(HoldBackend& backend, const std::string& name, HoldKind kind, SteadyTime deadline,
                     const LockOptions& options, OwnerKey owner) {
    throw_if_closed();
    if (auto h = find(name, kind, owner)) {
        // Re-entry (L6) never goes to the backend; a hold known lost is not silently re-entered.
        if (h->lost_or_expired()) {
            report_lost(h, end_reason(*h, SteadyClock::now()), "its validity ended before a re-entry");
            throw LockLostError("lock '" + name + "': re-entering a hold that was lost");
        }
        ++h->count;
        return true;
    }
    auto hold = std::make_shared<Hold>();
    hold->name = name;
    hold->kind = kind;
    hold->thread = owner.number;
    hold->movable = owner.movable;
    if (owner.movable) hold->stop = std::stop_source();
    hold->owner = id_ + ":" + std::to_string(hold->thread);
    hold->lease = options.lease;
    hold->renew = options.renew;
    hold->on_lost = options.on_lost;
    const auto started = SteadyClock::now();
    const bool logging = logger()->should_log(spdlog::level::debug);
    if (logging) lock_log(spdlog::level::debug, name, log_tag(backend, kind), "acquire started");
    bool acquired = false;
    try {
        acquired = backend.acquire(*hold, deadline);
    } catch (const LockClientClosedError&) {
        throw;
    } catch (...) {
        // The service went while this thread waited: whatever ended the wait (a killed
        // statement, a closed connection) is the closing, not a backend failure.
        throw_if_closed();
        throw;
    }
    if (!acquired) {
        throw_if_closed();
        if (logging) lock_log(spdlog::level::debug, name, log_tag(backend, kind), "gave up after {} ms", elapsed_ms(started));
        return false;
    }
    if (logging) {
        lock_log(spdlog::level::debug, name, log_tag(backend, kind), "granted after {} ms, token {}", elapsed_ms(started),
                 hold->token);
    }
    hold->acquired_at = SteadyClock::now();
    if (options.max_hold) hold->cap = hold->acquired_at + *options.max_hold;
    hold->count = 1;
    bool registered = false;
    {
        MutexLock g(mu_);
        if (!closed_.load()) {
            const Key k = key_of(name, kind, owner);
            unlocked_after_loss_.erase(k);
            holds_[k] = hold;
            registered = true;
        }
    }
    if (!registered) {
        // Acquired just as the service went: given back, never handed out.
        bool released = false;
        try {
            released = backend.release(*hold);
        } catch (const std::exception&) {
        }
        hold->lost.store(true);
        if (!released) backend.abandon(*hold);
        throw_closed();
    }
    backend.registered(*hold);
    expiry_.hold_added(hold->ends_at());
    return true;
}

void HoldTable::unlock(HoldBackend& backend, const std::string& name, HoldKind kind, UnlockMode mode,
                       OwnerKey owner) {
    const Key k = key_of(name, kind, owner);
    std::shared_ptr<Hold> hold;
    {
        MutexLock g(mu_);
        auto it = holds_.find(k);
        if (it == holds_.end()) {
            // The guard's destructor after an unlock_checked() that already threw LockLostError.
            if (unlocked_after_loss_.erase(k) > 0) return;
            throw NotOwnerError("lock '" + name + "': unlock() by a thread that does not hold it");
        }
        hold = it->second;
        if (!hold->lost.load() && hold->count > 1) {
            --hold->count;
            return;
        }
        holds_.erase(it);
    }
    if (const SteadyTime now = SteadyClock::now(); !hold->lost.load() && now >= hold->ends_at()) {
        // Past its validity (or its cap) the lock may be someone else's: reported, then released
        // as a lost hold.
        report_lost(hold, end_reason(*hold, now), "its validity ended before unlock");
    }
    if (!hold->lost.load()) {
        bool released = false;
        try {
            released = backend.release(*hold);
        } catch (const std::exception& e) {
            // The backend's error (ConnectionError, DbError) says what happened; the hold is
            // forgotten: the backend ends it on its own (lease, session end).
            backend.abandon(*hold);
            if (mode == UnlockMode::Throw) throw;
            logger()->warn("lock '{}': release failed ({}); the backend ends the hold on its own", name, e.what());
            return;
        }
        if (released) {
            lock_log(spdlog::level::debug, name, log_tag(backend, kind), "released after holding {} ms",
                     elapsed_ms(hold->acquired_at));
            return;
        }
        report_lost(hold, LockLossReason::FoundGone, "found gone by unlock");
    }
    backend.abandon(*hold);
    if (mode == UnlockMode::Report) {
        logger()->warn("lock '{}' was lost before unlock ({}); reported to on_lost, not thrown", name, hold->key);
        return;
    }
    if (!owner.movable) {
        MutexLock g(mu_);
        unlocked_after_loss_.insert(k);
    }
    throw LockLostError("lock '" + name + "' was lost before unlock (" + std::string(to_string(hold->loss_reason.load())) +
                        ", " + hold->key + ")");
}

void HoldTable::report_lost(const std::shared_ptr<Hold>& hold, LockLossReason reason, const std::string& message) {
    if (hold->lost.exchange(true)) return;  // once per hold
    losses_.fetch_add(1);
    hold->loss_reason.store(reason);
    report_loss(LockLoss{hold->name, hold->key, hold->owner, reason, message}, hold->stop, service_on_lost_,
                hold->on_lost);
}

}  // namespace lockstep::locks_detail
