#include "lockstep/coordination/leader_latch.h"

#include <exception>
#include <thread>

#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"
#include "lockstep/core/mutex.h"

namespace lockstep {

std::string_view to_string(RevokeReason r) noexcept {
    switch (r) {
        case RevokeReason::Closed: return "closed";
        case RevokeReason::HoldLost: return "hold lost";
    }
    return "unknown";
}

namespace {
std::stop_source ended_term() {
    std::stop_source s;
    s.request_stop();
    return s;
}
}  // namespace

struct LeaderLatch::State {
    Mutex mutex;
    CondVar changed;
    bool started GUARDED_BY(mutex) = false;
    bool closing GUARDED_BY(mutex) = false;
    bool leader GUARDED_BY(mutex) = false;
    // Set by the backend's on_lost (any thread) for the current term.
    bool hold_lost GUARDED_BY(mutex) = false;
    LockLoss loss GUARDED_BY(mutex);
    FenceToken epoch GUARDED_BY(mutex) = 0;
    std::stop_source term GUARDED_BY(mutex) = ended_term();
    long terms GUARDED_BY(mutex) = 0;
    std::thread thread;                    // written by start() before the thread runs, joined by close()
    std::thread::id thread_id GUARDED_BY(mutex);

    // The backend's report of a lost hold: ends the term at once, on the reporting thread.
    void hold_was_lost(const LockLoss& l) EXCLUDES(mutex) {
        MutexLock lock(mutex);
        if (!leader) return;
        leader = false;
        hold_lost = true;
        loss = l;
        term.request_stop();
        changed.notify_all();
    }
    bool is_closing() EXCLUDES(mutex) {
        MutexLock lock(mutex);
        return closing;
    }
    // Waits `d`, or less if close() comes first.
    void pause(std::chrono::milliseconds d) EXCLUDES(mutex) {
        MutexLock lock(mutex);
        const auto until = std::chrono::steady_clock::now() + d;
        while (!closing) {
            if (changed.wait_until(mutex, until) == std::cv_status::timeout) break;
        }
    }
    // A won campaign: a new term, with its own stop source.
    void begin_term(FenceToken new_epoch) EXCLUDES(mutex) {
        MutexLock lock(mutex);
        leader = true;
        hold_lost = false;
        epoch = new_epoch;
        term = std::stop_source();
        ++terms;
        changed.notify_all();
    }
};

LeaderLatch::LeaderLatch(LockService& service, std::string name, LeaderLatchOptions options)
    : service_(service), name_(std::move(name)), options_(std::move(options)), state_(std::make_shared<State>()) {}

LeaderLatch::~LeaderLatch() {
    try {
        close();
    } catch (const std::exception& e) {
        logger()->error("LeaderLatch '{}': close failed in the destructor: {}", name_, e.what());
    }
}

void LeaderLatch::start() {
    MutexLock lock(state_->mutex);
    if (state_->started || state_->closing) throw ConfigError("LeaderLatch", "start() on a latch already started or closed");
    state_->started = true;
    state_->thread = std::thread([this] { run(); });
}

void LeaderLatch::close() {
    {
        MutexLock lock(state_->mutex);
        if (state_->thread_id == std::this_thread::get_id()) {
            throw ConfigError("LeaderLatch", "close() from a latch callback (it waits for the callback's own thread)");
        }
        state_->closing = true;
        state_->changed.notify_all();
    }
    if (state_->thread.joinable()) state_->thread.join();
}

bool LeaderLatch::is_leader() const {
    MutexLock lock(state_->mutex);
    return state_->leader;
}

bool LeaderLatch::await_leadership(std::chrono::steady_clock::time_point deadline) const {
    MutexLock lock(state_->mutex);
    while (!state_->leader && !state_->closing) {
        if (state_->changed.wait_until(state_->mutex, deadline) == std::cv_status::timeout) break;
    }
    return state_->leader;
}

FenceToken LeaderLatch::epoch() const {
    MutexLock lock(state_->mutex);
    return state_->leader ? state_->epoch : 0;
}

std::stop_token LeaderLatch::term_stop_token() const {
    MutexLock lock(state_->mutex);
    return state_->term.get_token();
}

long LeaderLatch::terms() const {
    MutexLock lock(state_->mutex);
    return state_->terms;
}

// The latch's thread: campaign, lead, step down, until close(). Every term that begins (on_elected)
// ends with the hold released and on_revoked called, even when a callback throws.
void LeaderLatch::run() {
    State& s = *state_;
    {
        MutexLock lock(s.mutex);
        s.thread_id = std::this_thread::get_id();
    }
    const std::unique_ptr<DistributedMutex> mutex = make_latch_mutex();
    if (!mutex) return;
    while (!s.is_closing()) {
        if (!campaign(*mutex)) continue;
        const FenceToken epoch = read_epoch(*mutex);
        s.begin_term(epoch);
        notify_elected(epoch);
        step_down(*mutex, lead(*mutex, epoch));
    }
}

// The latch's mutex, whose on_lost ends the term at once; null (logged) if it cannot be made.
std::unique_ptr<DistributedMutex> LeaderLatch::make_latch_mutex() {
    LockOptions lock_options = options_.lock;
    lock_options.max_wait.reset();
    lock_options.on_lost = [state = state_, user = options_.lock.on_lost](const LockLoss& loss) {
        state->hold_was_lost(loss);
        if (user) user(loss);
    };
    try {
        return service_.make_mutex(name_, lock_options);
    } catch (const std::exception& e) {
        logger()->error("LeaderLatch '{}': cannot make its mutex: {}", name_, e.what());
        return nullptr;
    }
}

// One campaign slice, so that close() is seen between two attempts. A failed attempt is logged
// and followed by retry_pause.
bool LeaderLatch::campaign(DistributedMutex& mutex) {
    try {
        return mutex.try_lock_until_steady(detail::deadline_from_now(options_.campaign_slice));
    } catch (const std::exception& e) {
        logger()->warn("LeaderLatch '{}': campaign attempt failed: {}", name_, e.what());
        state_->pause(options_.retry_pause);
        return false;
    }
}

// The term's epoch: the hold's fencing token, or 0 (logged) if the backend cannot give one.
FenceToken LeaderLatch::read_epoch(DistributedMutex& mutex) {
    try {
        return mutex.fence_token();
    } catch (const std::exception& e) {
        logger()->warn("LeaderLatch '{}': no fencing token: {}", name_, e.what());
        return 0;
    }
}

void LeaderLatch::notify_elected(FenceToken epoch) {
    if (!options_.on_elected) return;
    try {
        options_.on_elected(epoch);
    } catch (const std::exception& e) {
        logger()->error("LeaderLatch '{}': on_elected threw: {}", name_, e.what());
    }
}

// Leads until closed or lost, and ends the term. lost() is read outside the latch's mutex: the
// backend may hold its own mutex while it calls on_lost, which takes the latch's.
Revocation LeaderLatch::lead(DistributedMutex& mutex, FenceToken epoch) {
    State& s = *state_;
    Revocation revocation{.reason = RevokeReason::Closed, .epoch = epoch};
    for (;;) {
        const bool lost_now = mutex.lost();
        MutexLock lock(s.mutex);
        if (lost_now && !s.hold_lost) {
            s.hold_lost = true;
            s.loss = LockLoss{.name = name_, .reason = LockLossReason::Expired,
                              .message = "the hold's validity ran out"};
        }
        if (s.hold_lost) {
            revocation.reason = RevokeReason::HoldLost;
            revocation.loss = s.loss.reason;
            revocation.message = s.loss.message;
        }
        if (s.hold_lost || s.closing) {
            s.leader = false;
            s.term.request_stop();
            s.changed.notify_all();
            return revocation;
        }
        s.changed.wait_for(s.mutex, options_.loss_poll);
    }
}

// Releases (a lost hold is reported, never thrown), so that a standby is elected at once, then
// calls on_revoked.
void LeaderLatch::step_down(DistributedMutex& mutex, const Revocation& revocation) {
    try {
        mutex.unlock();
    } catch (const std::exception& e) {
        logger()->warn("LeaderLatch '{}': release failed: {}", name_, e.what());
    }
    if (options_.on_revoked) {
        try {
            options_.on_revoked(revocation);
        } catch (const std::exception& e) {
            logger()->error("LeaderLatch '{}': on_revoked threw: {}", name_, e.what());
        }
    }
}

}  // namespace lockstep
