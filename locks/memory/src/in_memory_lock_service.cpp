// InMemoryLockService: the hold flow of hold_table.h over a map of names guarded by one mutex.
// A mutex release wakes one waiter (notify_one, L9); a read-write release wakes all of that name's
// waiters (readers may proceed together), as the Redis read-write lock does.
#include "lockstep/locks/in_memory_lock_service.h"

#include <map>

#include "hold_table.h"
#include "hold_table_held.h"
#include "hold_table_mutex.h"
#include "lockstep/core/names.h"
#include "lockstep/core/error.h"
#include "lockstep/core/mutex.h"
#include "lockstep/locks/lock_errors.h"

namespace lockstep {

using HoldRecord = locks_detail::Hold;  // lockstep::Hold is the movable value (hold.h)
using locks_detail::HoldKind;
using locks_detail::SteadyTime;

namespace {

// One name's state. Guarded by State::mu: every NameState lives in State::names (GUARDED_BY(mu))
// and is reached only through it with mu held.
struct NameState {
    std::uint64_t mutex_owner = 0;   // thread number, 0 = free
    std::uint64_t writer = 0;        // read-write lock writer, 0 = none
    std::map<std::uint64_t, int> readers;
    int writers_waiting = 0;         // writer preference: readers arriving now wait
    FenceToken last_token = 0;       // shared by the mutex and the writer, as on Redis
    CondVar mutex_cv;
    CondVar rw_cv;
};

}  // namespace

struct InMemoryLockService::State : locks_detail::HoldBackend {
    std::string_view backend_name() const noexcept override { return "memory"; }
    explicit State(LockServiceOptions o) : table(locks_detail::random_hex_id(), std::move(o.on_lost), *this) {}

    locks_detail::HoldTable table;
    Mutex mu;
    std::map<std::string, NameState> names GUARDED_BY(mu);
    int waiting GUARDED_BY(mu) = 0;
    bool closing GUARDED_BY(mu) = false;  // the service is gone: every wait ends (close())

    // Waits on `cv` until `ready` or `deadline`; counts the waiter. `ready` reads a NameState,
    // so it runs with mu held: only from here.
    template <class Ready>
    bool wait(CondVar& cv, SteadyTime deadline, Ready ready) REQUIRES(mu) {
        if (ready()) return true;
        ++waiting;
        bool ok = true;
        while (!ready()) {
            if (closing) {
                ok = false;  // the hold table turns this into LockClientClosedError
                break;
            }
            if (deadline == SteadyTime::max()) {
                cv.wait(mu);
            } else if (cv.wait_until(mu, deadline) == std::cv_status::timeout) {
                ok = ready();
                break;
            }
        }
        --waiting;
        return ok;
    }

    bool acquire(HoldRecord& h, SteadyTime deadline) override EXCLUDES(mu) {
        MutexLock g(mu);
        NameState& n = names[h.name];
        const auto me = h.thread;
        h.key = "memory:" + h.name;
        switch (h.kind) {
        case HoldKind::Mutex:
            if (!wait(n.mutex_cv, deadline, [&] { return n.mutex_owner == 0; })) return false;
            n.mutex_owner = me;
            h.token = ++n.last_token;
            return true;
        case HoldKind::Write: {
            ++n.writers_waiting;
            const bool ok = wait(n.rw_cv, deadline, [&] {
                return n.writer == 0 && (n.readers.empty() || (n.readers.size() == 1 && n.readers.count(me)));
            });
            --n.writers_waiting;
            if (!ok) {
                n.rw_cv.notify_all();  // readers held back by this writer's preference
                return false;
            }
            n.writer = me;
            h.token = ++n.last_token;
            return true;
        }
        case HoldKind::Read:
            // A writer downgrading may read; other readers wait for the writer and for writers
            // already waiting (writer preference: a stream of readers cannot starve a writer).
            if (!wait(n.rw_cv, deadline, [&] { return n.writer == me || (n.writer == 0 && n.writers_waiting == 0); })) {
                return false;
            }
            ++n.readers[me];
            return true;
        }
        return false;
    }

    bool release(HoldRecord& h) override EXCLUDES(mu) {
        MutexLock g(mu);
        auto it = names.find(h.name);
        if (it == names.end()) return false;
        NameState& n = it->second;
        switch (h.kind) {
        case HoldKind::Mutex:
            if (n.mutex_owner != h.thread) return false;
            n.mutex_owner = 0;
            n.mutex_cv.notify_one();  // wake one waiter (L9)
            return true;
        case HoldKind::Write:
            if (n.writer != h.thread) return false;
            n.writer = 0;
            n.rw_cv.notify_all();
            return true;
        case HoldKind::Read: {
            auto r = n.readers.find(h.thread);
            if (r == n.readers.end()) return false;
            if (--r->second == 0) n.readers.erase(r);
            n.rw_cv.notify_all();
            return true;
        }
        }
        return false;
    }

    // Gives the hold back: with no lease here, a hold ended by max_hold (or left by a closed
    // service) would otherwise keep its name taken. Owner numbers are never reused, so a hold
    // given back already (or taken over) is not released twice.
    void abandon(HoldRecord& h) noexcept override EXCLUDES(mu) { release(h); }

    // The service's destructor: holds reported lost (ClientClosed), waiters woken; they leave
    // with LockClientClosedError (hold_table.h).
    void close() EXCLUDES(mu) {
        table.close(*this);
        MutexLock g(mu);
        closing = true;
        for (auto& [name, n] : names) {
            n.mutex_cv.notify_all();
            n.rw_cv.notify_all();
        }
    }

    void expire(const std::string& name) EXCLUDES(mu) {
        {
            MutexLock g(mu);
            auto it = names.find(name);
            if (it == names.end()) return;
            NameState& n = it->second;
            n.mutex_owner = 0;
            n.writer = 0;
            n.readers.clear();
            n.mutex_cv.notify_one();
            n.rw_cv.notify_all();
        }
        for (const auto& h : table.all()) {
            if (h->name == name) table.report_lost(h, LockLossReason::Expired, "expired by InMemoryLockService::expire");
        }
    }
};

namespace {

using StatePtr = std::shared_ptr<InMemoryLockService::State>;

class InMemoryReadWriteLock final : public DistributedReadWriteLock {
public:
    InMemoryReadWriteLock(StatePtr s, std::string name, LockOptions o)
        : s_(std::move(s)), name_(std::move(name)), o_(std::move(o)) {}
    void lock() override { wait_or_throw(false); }
    bool try_lock() override { return try_lock_until_steady(SteadyTime::min()); }
    bool try_lock_until_steady(SteadyTime deadline) override {
        if (s_->table.count(name_, HoldKind::Write) == 0 && s_->table.count(name_, HoldKind::Read) > 0) {
            throw LockUpgradeError("lock '" + name_ + "': read -> write upgrade refused; unlock_shared() first");
        }
        return s_->table.lock(*s_, name_, HoldKind::Write, deadline, o_);
    }
    void unlock_as(UnlockMode mode) override { s_->table.unlock(*s_, name_, HoldKind::Write, mode); }
    void lock_shared() override { wait_or_throw(true); }
    bool try_lock_shared() override { return try_lock_shared_until_steady(SteadyTime::min()); }
    bool try_lock_shared_until_steady(SteadyTime deadline) override {
        return s_->table.lock(*s_, name_, HoldKind::Read, deadline, o_);
    }
    void unlock_shared_as(UnlockMode mode) override { s_->table.unlock(*s_, name_, HoldKind::Read, mode); }
    // Movable holds: an owner of their own, so never an upgrade nor a downgrade of a thread's.
    lockstep::Hold acquire() override {
        return locks_detail::acquire_movable_or_throw(s_, name_, HoldKind::Write, o_, "lock");
    }
    lockstep::Hold try_acquire_until_steady(SteadyTime deadline) override {
        return locks_detail::acquire_movable(s_, name_, HoldKind::Write, deadline, o_);
    }
    lockstep::Hold acquire_shared() override {
        return locks_detail::acquire_movable_or_throw(s_, name_, HoldKind::Read, o_, "lock");
    }
    lockstep::Hold try_acquire_shared_until_steady(SteadyTime deadline) override {
        return locks_detail::acquire_movable(s_, name_, HoldKind::Read, deadline, o_);
    }
    bool lost() const override {
        return s_->table.lost(name_, HoldKind::Write) || s_->table.lost(name_, HoldKind::Read);
    }
    int write_hold_count() const override { return s_->table.count(name_, HoldKind::Write); }
    int read_hold_count() const override { return s_->table.count(name_, HoldKind::Read); }
    FenceToken fence_token() const override { return s_->table.token(name_, HoldKind::Write); }
    const std::string& name() const noexcept override { return name_; }

private:
    void wait_or_throw(bool shared) {
        const auto deadline = o_.max_wait ? detail::deadline_from_now(*o_.max_wait) : SteadyTime::max();
        const bool ok = shared ? try_lock_shared_until_steady(deadline) : try_lock_until_steady(deadline);
        if (!ok) throw TimeoutError("lock '" + name_ + "': not acquired within max_wait");
    }
    StatePtr s_;
    std::string name_;
    LockOptions o_;
};

}  // namespace

InMemoryLockService::InMemoryLockService(LockServiceOptions options)
    : state_(std::make_shared<State>(std::move(options))) {}
InMemoryLockService::~InMemoryLockService() { state_->close(); }

std::unique_ptr<DistributedMutex> InMemoryLockService::make_mutex(std::string name, LockOptions options) {
    check_name("lock name", name);
    return std::make_unique<locks_detail::HoldTableMutex<InMemoryLockService::State>>(state_, std::move(name), std::move(options), "lock");
}

std::unique_ptr<DistributedReadWriteLock> InMemoryLockService::make_read_write_lock(std::string name, LockOptions options) {
    check_name("lock name", name);
    return std::make_unique<InMemoryReadWriteLock>(state_, std::move(name), std::move(options));
}

void InMemoryLockService::expire(const std::string& name) { state_->expire(name); }

int InMemoryLockService::waiting() const {
    MutexLock g(state_->mu);
    return state_->waiting;
}

}  // namespace lockstep
