// MysqlLockService: distributed mutexes on MySQL/MariaDB's named locks (GET_LOCK / RELEASE_LOCK),
// for services that have a database and no other infrastructure to lock with.
//
//   lockstep::MysqlLockService locks(lockstep::parse_mysql_url(url));
//   auto m = locks.make_mutex("product:42");
//   { std::unique_lock hold(*m); ... m->fence_token() ... }
//
// What a named lock is, and what this class does about each fact (docs/locks.md, "MySQL"):
//   - It belongs to the SESSION, re-entrantly: a second caller borrowing the same pooled
//     connection would "acquire" it too, and a RELEASE_LOCK on another connection returns 0 and
//     leaves it held. So every hold pins a connection of its own (not the db pool's) from the
//     moment GET_LOCK succeeds until RELEASE_LOCK; connections of released holds are kept for
//     the next hold. Reentrancy is counted here (L6), never by stacking GET_LOCKs.
//   - The server frees it when the session ends: at once for a killed process (its socket
//     closes), after `wait_timeout` for a stopped one. Each pinned session runs with
//     wait_timeout = the lock's lease (whole seconds, rounded up), and the service's watchdog
//     asks `IS_USED_LOCK(name) = CONNECTION_ID()` on it every lease/3: that keeps a live holder's
//     session from idling out, and finds a hold whose session died (KILL, server restart,
//     network) and reports it lost (LockLossReason::Expired / Unreachable). A hold is valid
//     until the send time of its GET_LOCK or of its last answered check + lease − drift
//     (distributed_mutex.h): lost() turns true then even while a check hangs. Pinned sessions
//     are opened with a read timeout of a third of the lease (at least 1 s, at most
//     MysqlOptions::read_timeout), so a check or release into a partition gives up that soon.
//   - A stopped holder can wake after its session ended and the lock moved on (L5): fencing
//     tokens are required. The token is drawn in GET_LOCK's own statement, once the lock is held:
//     the server's UUID_SHORT() without its server-id byte ((start-up seconds << 24) + a global
//     counter), so tokens strictly increase per name with no row written per acquisition; across
//     a restart the start-up seconds grow, and an epoch row written once per server run refuses
//     a server whose tokens went back (a clock stepped back past its previous start-up, a
//     fail-over to an older server). docs/locks.md argues it.
//   - A GET_LOCK wait longer than the client's read timeout ends in error 2013: waits are sent
//     in chunks shorter than the pinned session's read timeout.
//   - Names are limited to 64 (MySQL) / 192 (MariaDB) characters: a longer prefixed name is
//     shortened to its first 100 characters + '#' + a 128-bit hash of the whole.
//   - No read-write lock: GET_LOCK has no shared mode (supports_read_write() is false and
//     make_read_write_lock throws ConfigError). See docs/locks.md for the row-lock design that
//     would give one, and why it is not this class.
//
// Errors: a connection failure while acquiring is a ConnectionError (RetryCall); server errors
// are DbError; the rest as DistributedMutex.
//
// Thread safety: every member may be called from any thread. REQUIRES: the service outlives
// every lock it made.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "lockstep/core/mysql_options.h"
#include "lockstep/locks/lock_service.h"

namespace lockstep {

struct MysqlLockStats {
    std::uint64_t sessions_opened = 0;  // connections opened for holds
    std::uint64_t acquired = 0;         // new acquisitions
    std::uint64_t wait_chunks = 0;      // GET_LOCK calls that timed out inside a longer wait
    std::uint64_t acquire_statements = 0;  // statements acquisitions sent (GET_LOCK + token is one)
    std::uint64_t checks = 0;           // watchdog checks of pinned sessions
    std::uint64_t losses = 0;           // holds reported lost
    std::uint64_t epoch_writes = 0;     // epoch guard rows written (once per server run)
    std::uint64_t epoch_refusals = 0;   // new sessions refused: the server's tokens went back
};

class MysqlLockService : public LockService {
public:
    // Connects once to create the epoch guard's table (lockstep_lock_epoch) if needed.
    explicit MysqlLockService(MysqlOptions mysql, LockServiceOptions options = {});
    ~MysqlLockService() override;

    std::unique_ptr<DistributedMutex> make_mutex(std::string name, LockOptions options = {}) override;
    std::unique_ptr<DistributedReadWriteLock> make_read_write_lock(std::string name, LockOptions options = {}) override;
    bool supports_read_write() const noexcept override { return false; }
    std::string_view backend() const noexcept override { return "mysql"; }
    // UTC_TIMESTAMP(6) on a pooled lock session (no time zone involved).
    std::chrono::system_clock::time_point server_time() override;

    // The server-side lock name of `name` (prefixed, shortened if too long).
    std::string lock_name(const std::string& name) const;
    MysqlLockStats stats() const;

    struct State;

private:
    std::shared_ptr<State> state_;
};

}  // namespace lockstep
