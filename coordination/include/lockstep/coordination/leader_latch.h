// LeaderLatch: one leader per name among every process that runs a latch of that name, over any
// LockService (Curator's LeaderLatch, built on the library's one hold). A background thread
// campaigns for the name's mutex; the latch that holds it is the leader, and keeps it, renewed by
// the backend, until close() or until the hold is lost.
//
//   lockstep::LeaderLatch latch(service, "invalidator", {
//       .on_elected = [](lockstep::FenceToken epoch) { ... },
//       .on_revoked = [](const lockstep::Revocation& r) { ... }});
//   latch.start();
//   if (latch.await_leadership(30s)) {
//       std::stop_token term = latch.term_stop_token();
//       while (!term.stop_requested()) {
//           lockstep::fenced_update(tx, key, latch.epoch(), {...});   // a deposed leader's late
//       }                                                               // write is refused
//   }
//
// The epoch is the hold's fencing token: strictly greater for every new term of the name on the
// same backend. Pass it to the database's fence check (db/fenced_write.h) with every write a
// leader makes: a leader that was paused past its lease (GC, SIGSTOP, a partition) may still
// believe it leads when it resumes, and only the fence refuses its late writes (RACES L5).
//
// Leadership ends when the hold is lost (lease run out, session ended, key deleted: the
// backend's on_lost): is_leader() turns false and the term's stop token is requested at once, on
// the thread that noticed the loss; on_revoked follows on the latch's thread, which then
// releases what is left of the hold and campaigns again. close() (and the destructor) ends the
// term the same way, releases the hold so a standby is elected at once, and stops campaigning.
//
// Callbacks run on the latch's own thread, one at a time, on_elected before on_revoked of the
// same term. They may call is_leader(), epoch() and term_stop_token(), not close() (it waits for
// that thread: ConfigError).
//
// Thread safety: every member may be called from any thread. REQUIRES: the service outlives the
// latch.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>

#include "lockstep/locks/lock_loss.h"
#include "lockstep/locks/lock_options.h"
#include "lockstep/locks/lock_service.h"
#include "lockstep/locks/steady_deadline.h"

namespace lockstep {

enum class RevokeReason {
    Closed,    // close() or the destructor gave leadership up
    HoldLost,  // the backend lost the hold (see LockLossReason in `loss`)
};
std::string_view to_string(RevokeReason r) noexcept;

// One term's end, as given to on_revoked.
struct Revocation {
    RevokeReason reason = RevokeReason::Closed;
    FenceToken epoch = 0;  // the term that ended
    LockLossReason loss = LockLossReason::Expired;  // meaningful for HoldLost only
    std::string message;
};

struct LeaderLatchOptions {
    // The hold's options: `lease` says how long a stopped leader keeps every standby out (and so
    // how soon a dead leader is replaced); max_wait is ignored (the latch campaigns until closed).
    // `on_lost` runs as well as the latch's own handling.
    LockOptions lock;
    // How long one campaign attempt waits for the mutex before the latch checks whether it was
    // closed: the most close() waits for a latch that is not the leader.
    std::chrono::milliseconds campaign_slice{250};
    // Pause after an attempt that failed with an error (server down) before the next.
    std::chrono::milliseconds retry_pause{200};
    // How often the leader's thread checks lost() (no round trip): the latest a loss that the
    // backend reports only through lost() (validity ran out on the holder's clock) ends a term.
    std::chrono::milliseconds loss_poll{20};
    std::function<void(FenceToken epoch)> on_elected;
    std::function<void(const Revocation&)> on_revoked;
};

class LeaderLatch {
public:
    // REQUIRES: `name` follows the name rule (ConfigError when start() makes the mutex).
    LeaderLatch(LockService& service, std::string name, LeaderLatchOptions options = {});
    // close().
    ~LeaderLatch();
    LeaderLatch(const LeaderLatch&) = delete;
    LeaderLatch& operator=(const LeaderLatch&) = delete;

    // Starts campaigning. ConfigError when already started or closed.
    void start();
    // Gives leadership up (on_revoked with Closed), releases the hold and stops campaigning; waits
    // for the latch's thread. Idempotent. ConfigError when called from a latch callback.
    void close();

    bool is_leader() const;
    // Waits until this latch leads (true) or the deadline passes / the latch is closed (false).
    bool await_leadership(std::chrono::steady_clock::time_point deadline) const;
    template <class Rep, class Period>
    bool await_leadership(const std::chrono::duration<Rep, Period>& timeout) const {
        return await_leadership(detail::deadline_from_now(timeout));
    }
    // The current term's epoch (its fencing token); 0 when not the leader.
    FenceToken epoch() const;
    // Requested when the current term ends (loss or close). When not the leader: a token that is
    // already requested.
    std::stop_token term_stop_token() const;
    // Terms this latch has won so far.
    long terms() const;
    const std::string& name() const noexcept { return name_; }

private:
    struct State;
    void run();
    // run's stages (leader_latch.cpp).
    std::unique_ptr<DistributedMutex> make_latch_mutex();
    bool campaign(DistributedMutex& mutex);
    FenceToken read_epoch(DistributedMutex& mutex);
    void notify_elected(FenceToken epoch);
    Revocation lead(DistributedMutex& mutex, FenceToken epoch);
    void step_down(DistributedMutex& mutex, const Revocation& revocation);

    LockService& service_;
    std::string name_;
    LeaderLatchOptions options_;
    std::shared_ptr<State> state_;
};

}  // namespace lockstep
