// Semaphore: N permits per name, shared by every process that opens the same name (Curator's
// InterProcessSemaphoreV2, Redisson's RPermitExpirableSemaphore). Each permit is a hold like a
// lock's: leased, renewed by the semaphore's watchdog every lease/3 while its holder lives,
// fenced (a token strictly greater than every earlier permit's of the name), and never lost
// silently. A holder that dies (SIGKILL) stops renewing: its permit expires within the lease and
// frees its slot. An idle semaphore leaves nothing behind: every key has a TTL.
//
//   auto sem = lockstep::make_semaphore(redis_locks, "exports", {.permits = 8, .lease = 10s});
//   lockstep::SemaphorePermit permit = sem->acquire();        // blocks (max_wait: TimeoutError)
//   run_export(permit.stop_token(), permit.fence_token());     // stop_token: the permit was lost
//   permit.release_checked();                                  // LockLostError if it was lost
//
// Backends: Redis (redis://, redis+cluster://, redis+sentinel://) and ZooKeeper (zookeeper://,
// ephemeral-sequential lease nodes, FIFO; see docs/coordination.md). On Redis, keys of a name share the
// hash tag `{<name>}`, so the scripts are legal on Redis Cluster:
//   <prefix>{<name>}:sem        zset: permit id -> expiry (server ms), PEXPIRE >= the longest lease
//   <prefix>{<name>}:sem:fence  fencing-token counter (PX lease; tokens never go below the server
//                               clock in µs, so they keep increasing after it expired)
//   <prefix>{<name>}:sem:ch     pub/sub channel: a permit was released (not a key)
// One Lua script purges expired permits (a dead holder's), grants one if fewer than N remain,
// and takes the fencing token, atomically.
//
// Validity: a permit is valid until `sent + lease - drift` on the holder's own steady clock,
// where `sent` is the send time of the acquisition or of the last renewal the server
// acknowledged; lost() is true from then on, or once a renewal found the permit gone. The
// watchdog notices within lease/3, fires on_lost once and requests the permit's stop token.
//
// A SemaphorePermit keeps the contract of a lock's movable Hold (hold.h, docs/holds.md): empty
// values, release() vs release_checked(), the destructor, a stop token requested on loss or at
// SemaphoreOptions::max_hold and never by a release. A permit is never reentrant: each is one
// slot, and a second acquire() by the same thread takes (or waits for) another.
//
// Fairness: none (barging). A freed permit goes to whichever waiter's attempt reaches Redis
// first; a release wakes every waiter of every process (one message), and a waiter that missed it
// tries again when the earliest permit would expire. Under constant contention a waiter can wait
// indefinitely; bound it with max_wait, or queue in front with a fair lock if order matters.
//
// Thread safety: a Semaphore may be shared by any number of threads. A SemaphorePermit is a
// movable value owned by one thread at a time; it may be released on any thread. REQUIRES: the
// RedisClient outlives the Semaphore.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

#include "lockstep/locks/lock_loss.h"
#include "lockstep/locks/lock_service.h"
#include "lockstep/locks/steady_deadline.h"

namespace lockstep {

class RedisClient;

struct SemaphoreOptions {
    // N: permits of the name. Every process must open the name with the same N.
    int permits = 1;
    // How long a permit outlives its holder's last renewal (how soon a dead holder's permit
    // frees). Renewed every lease/3. At least 30 ms.
    std::chrono::milliseconds lease{30000};
    // acquire() gives up with TimeoutError after waiting this long; unset: it waits indefinitely.
    std::optional<std::chrono::milliseconds> max_wait;
    // A cap on every permit (LockOptions::max_hold's): this long after its acquisition a permit
    // still held is reported lost with LockLossReason::MaxHoldReached (on_lost, lost(), its stop
    // token) and given back to the server, and its holder's release then reports the loss
    // (LockLostError from release_checked()). Unset: no cap; set: positive (ConfigError).
    std::optional<std::chrono::milliseconds> max_hold;
    // Called once per lost permit, on the thread that notices (the watchdog or a release). Keep
    // it quick.
    std::function<void(const LockLoss&)> on_lost;
};

namespace detail {
struct SemaphoreImpl;
struct PermitState;
}  // namespace detail

// One permit. Released by release(), release_checked() or the destructor (which reports a loss
// and never throws). An empty permit (default-constructed, moved from, or released) holds
// nothing: release(), release_checked(), fence_token() and name() throw NotOwnerError, lost() is
// false, stop_token() has no stop state, the destructor does nothing.
class SemaphorePermit {
public:
    SemaphorePermit() = default;
    SemaphorePermit(SemaphorePermit&&) noexcept;
    SemaphorePermit& operator=(SemaphorePermit&&) noexcept;
    ~SemaphorePermit();

    // Holds a permit (not yet released; it may be lost).
    bool held() const noexcept { return static_cast<bool>(state_); }
    explicit operator bool() const noexcept { return held(); }
    // REQUIRES: holds a permit (NotOwnerError).
    FenceToken fence_token() const;
    // The semaphore's name. REQUIRES: holds a permit (NotOwnerError).
    const std::string& name() const;
    // Known lost: the validity ran out on this process's clock, the server no longer has it, or
    // it reached max_hold. No round trip. False when empty.
    bool lost() const;
    // Requested when the permit is found lost or reaches max_hold; never by a release. No stop
    // state when empty.
    std::stop_token stop_token() const noexcept;
    // Releases the permit. A lost permit is reported (lost(), on_lost, a log line), not thrown,
    // and so is a failed release. REQUIRES: holds a permit (NotOwnerError).
    void release();
    // The same, but LockLostError (naming the reason) when the permit was lost (also when the
    // release failed after the permit's validity ran out), and the server's error when the
    // release of a permit still valid failed (the permit is forgotten either way; the server
    // drops it within the lease). REQUIRES: holds a permit (NotOwnerError).
    void release_checked();

private:
    friend struct detail::SemaphoreImpl;
    SemaphorePermit(std::shared_ptr<detail::SemaphoreImpl> owner, std::shared_ptr<detail::PermitState> state);
    void release_as(UnlockMode mode);

    std::shared_ptr<detail::SemaphoreImpl> owner_;
    std::shared_ptr<detail::PermitState> state_;
};

class Semaphore {
public:
    // REQUIRES: `name` follows the name rule (ConfigError), permits >= 1 and lease >= 30 ms
    // (ConfigError). `prefix` namespaces the keys as LockServiceOptions::prefix does.
    Semaphore(RedisClient& redis, std::string name, SemaphoreOptions options = {}, std::string prefix = "ls:");
    // Stops the watchdog; permits still held are released and reported lost (ClientClosed).
    ~Semaphore();
    Semaphore(const Semaphore&) = delete;
    Semaphore& operator=(const Semaphore&) = delete;

    // Blocks until a permit is granted; TimeoutError after SemaphoreOptions::max_wait.
    SemaphorePermit acquire();
    // One attempt, no waiting.
    std::optional<SemaphorePermit> try_acquire();
    template <class Rep, class Period>
    std::optional<SemaphorePermit> try_acquire_for(const std::chrono::duration<Rep, Period>& timeout) {
        return try_acquire_until_steady(detail::deadline_from_now(timeout));
    }
    std::optional<SemaphorePermit> try_acquire_until_steady(std::chrono::steady_clock::time_point deadline);

    // Permits free on the server now (expired ones purged first). One round trip.
    int available();
    // Permits this object handed out that are neither released nor lost.
    std::size_t held() const;
    // Renewal rounds the watchdog completed (tests wait on it).
    long renewals() const;
    const std::string& name() const noexcept;
    // The zset of permits (see the key layout above).
    std::string permits_key() const;
    std::string fence_key() const;

private:
    friend std::unique_ptr<Semaphore> make_semaphore(LockService&, std::string, SemaphoreOptions);
    explicit Semaphore(std::shared_ptr<detail::SemaphoreImpl> impl);
    std::shared_ptr<detail::SemaphoreImpl> impl_;
};

// A semaphore over the backend of `service`: Redis (a redis:// service) shares its RedisClient
// and key prefix; ZooKeeper (a zookeeper:// service) takes its hosts, session timeout, root and
// prefix and opens its own session, whose lease nodes live under <root>/<prefix><name>#sem (the
// session timeout is then the lease; SemaphoreOptions::lease is not used). ConfigError naming the
// backend for the others: MySQL's GET_LOCK names one holder per lock and nothing that expires on
// its own; the in-memory and Redlock backends have none. REQUIRES: the service outlives the
// semaphore.
std::unique_ptr<Semaphore> make_semaphore(LockService& service, std::string name, SemaphoreOptions options = {});

}  // namespace lockstep
