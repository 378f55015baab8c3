#include "zookeeper_semaphore.h"
#ifdef LOCKSTEP_HAVE_ZOOKEEPER

#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"
#include "lockstep/core/mutex.h"
#include "lockstep/locks/zookeeper_last_heard.h"

namespace lockstep::detail {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

std::string random_guid() {
    std::random_device rd;
    std::mt19937_64 gen((static_cast<std::uint64_t>(rd()) << 32) ^ rd());
    static const char* hex = "0123456789abcdef";
    std::string id;
    std::uint64_t v = gen();
    for (int i = 0; i < 16; ++i, v >>= 4) id.push_back(hex[v & 0xf]);
    return id;
}

// The sequence ZooKeeper appended: the last 10 digits of the node's name.
std::string sequence_of(const std::string& node) { return node.size() >= 10 ? node.substr(node.size() - 10) : node; }

std::string error_text(int rc) { return zerror(rc); }

}  // namespace

// One client handle and its session. Closed (zookeeper_close) by its destructor, which joins the
// client's threads: the last user to drop it closes it, never the client's own event thread.
struct ZkHandle {
    ZooKeeperSemaphore::State* owner = nullptr;
    zhandle_t* zh = nullptr;
    std::uint64_t session = 0;
    ~ZkHandle() {
        if (zh) zookeeper_close(zh);
    }
};

struct ZooKeeperSemaphore::State {
    ZooKeeperLockOptions zk;
    std::string dir;
    int permits = 1;

    Mutex open_mu;  // one thread opens a handle at a time (taken before mu, never by the event thread)
    Mutex mu;
    CondVar changed;
    std::shared_ptr<ZkHandle> current GUARDED_BY(mu);
    const ZkHandle* live GUARDED_BY(mu) = nullptr;  // the handle whose events count (current, or the one connecting)
    std::uint64_t sessions GUARDED_BY(mu) = 0;
    int zstate GUARDED_BY(mu) = 0;
    bool expired GUARDED_BY(mu) = false;
    Clock::time_point disconnected_since GUARDED_BY(mu){};
    long child_changes GUARDED_BY(mu) = 0;
    bool closing GUARDED_BY(mu) = false;
    // When the current session last heard from the ensemble (probed from health(), which the
    // semaphore's watchdog calls every T/6): a permit ends by then + T − margin (session_bound).
    locks_detail::ZooKeeperLastHeard heard;

    milliseconds timeout_now() REQUIRES(mu) {
        return current && current->zh ? milliseconds(zoo_recv_timeout(current->zh)) : zk.session_timeout;
    }

    // The client library's event thread. Never calls the client (that would wait on itself).
    static void on_event(zhandle_t* zh, int type, int state, const char*, void* ctx) {
        auto* h = static_cast<ZkHandle*>(ctx);
        State* s = h->owner;
        MutexLock lock(s->mu);
        if (h != s->live) return;  // an abandoned handle closing
        if (type == ZOO_SESSION_EVENT) {
            s->zstate = state;
            if (state == ZOO_CONNECTED_STATE) {
                s->disconnected_since = {};
                // Asynchronous, so safe on the event thread (zh is open while it runs).
                s->heard.probe(zh, s->dir, h->session);
            } else if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE) {
                s->expired = true;
            } else if (s->disconnected_since == Clock::time_point{}) {
                s->disconnected_since = Clock::now();
            }
        } else if (type == ZOO_CHILD_EVENT || type == ZOO_DELETED_EVENT) {
            ++s->child_changes;
        }
        s->changed.notify_all();
    }

    // The current handle, opened (or replaced after an expiry) first. ConnectionError when no
    // session comes up within connect_timeout.
    std::shared_ptr<ZkHandle> handle() EXCLUDES(mu, open_mu) {
        {
            MutexLock lock(mu);
            if (current && !expired) return current;
        }
        MutexLock opening(open_mu);
        std::shared_ptr<ZkHandle> old;
        {
            MutexLock lock(mu);
            if (current && !expired) return current;
            old = std::move(current);
            current.reset();
            live = nullptr;
        }
        old.reset();  // closes an expired session's handle (or waits for its last user)
        auto fresh = std::make_shared<ZkHandle>();
        {
            MutexLock lock(mu);
            if (current) return current;  // another thread opened one meanwhile
            expired = false;
            zstate = 0;
            disconnected_since = {};
            fresh->session = ++sessions;
            fresh->owner = this;
            live = fresh.get();
        }
        zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
        // The handshake is sent after this instant: the session lives at least until then + T.
        heard.restart(Clock::now(), fresh->session);
        fresh->zh = zookeeper_init(zk.hosts.c_str(), &State::on_event, static_cast<int>(zk.session_timeout.count()),
                                   nullptr, fresh.get(), 0);
        if (!fresh->zh) throw ConnectionError("ZooKeeper " + zk.hosts + ": cannot create a client handle");
        const auto until = Clock::now() + zk.connect_timeout;
        {
            MutexLock lock(mu);
            while (zstate != ZOO_CONNECTED_STATE && !expired) {
                if (changed.wait_until(mu, until) == std::cv_status::timeout) break;
            }
            if (zstate != ZOO_CONNECTED_STATE) {
                expired = true;  // the next call starts over
                throw ConnectionError("ZooKeeper " + zk.hosts + ": no session within connect_timeout");
            }
            current = fresh;
            return current;
        }
    }

    void ensure_dir(zhandle_t* zh) {
        // Every component of <root>/<prefix><name>#sem, persistent; an existing one is fine.
        for (std::size_t at = 1; at <= dir.size(); ++at) {
            if (at != dir.size() && dir[at] != '/') continue;
            const std::string part = dir.substr(0, at);
            const int rc = zoo_create(zh, part.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0);
            if (rc != ZOK && rc != ZNODEEXISTS) {
                throw ConnectionError("ZooKeeper semaphore: cannot create " + part + ": " + error_text(rc));
            }
        }
    }

    // The children of `dir` ordered by sequence; watch: look again when they change.
    std::vector<std::string> list(zhandle_t* zh, bool watch) {
        String_vector v{};
        const int rc = zoo_get_children(zh, dir.c_str(), watch ? 1 : 0, &v);
        if (rc == ZNONODE) return {};
        if (rc != ZOK) throw ConnectionError("ZooKeeper semaphore: cannot list " + dir + ": " + error_text(rc));
        std::vector<std::string> names(v.data, v.data + v.count);
        deallocate_String_vector(&v);
        std::sort(names.begin(), names.end(),
                  [](const std::string& a, const std::string& b) { return sequence_of(a) < sequence_of(b); });
        return names;
    }
};

ZooKeeperSemaphore::ZooKeeperSemaphore(const ZooKeeperLockService& service, const std::string& name, int permits)
    : state_(std::make_shared<State>()) {
    state_->zk = service.zookeeper_options();
    std::string root = state_->zk.root;
    while (root.size() > 1 && root.back() == '/') root.pop_back();
    state_->dir = (root == "/" ? "" : root) + "/" + service.prefix() + name + "#sem";
    state_->permits = permits;
}

ZooKeeperSemaphore::~ZooKeeperSemaphore() {
    close();
    std::shared_ptr<ZkHandle> last;
    {
        MutexLock lock(state_->mu);
        last = std::move(state_->current);
    }
    last.reset();  // closes the session: every lease node left is deleted with it
}

void ZooKeeperSemaphore::close() {
    MutexLock lock(state_->mu);
    state_->closing = true;
    state_->changed.notify_all();
}

const std::string& ZooKeeperSemaphore::dir() const noexcept { return state_->dir; }

std::optional<ZkLease> ZooKeeperSemaphore::acquire(Clock::time_point deadline) {
    auto& s = *state_;
    const auto h = s.handle();
    const std::string guid = random_guid();
    const std::string prefix = s.dir + "/lease-" + guid + "-";
    char created[1024];
    Stat st{};
    int rc = zoo_create2(h->zh, prefix.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, created,
                         sizeof created, &st);
    if (rc == ZNONODE) {
        s.ensure_dir(h->zh);
        rc = zoo_create2(h->zh, prefix.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, created,
                         sizeof created, &st);
    }
    if (rc != ZOK) {
        // A create whose reply was lost may have been applied: remove what carries this guid, so
        // that no orphan node holds a permit for the rest of the session.
        try {
            for (const auto& child : s.list(h->zh, false)) {
                if (child.find(guid) != std::string::npos) zoo_delete(h->zh, (s.dir + "/" + child).c_str(), -1);
            }
        } catch (const std::exception&) {
        }
        throw ConnectionError("ZooKeeper semaphore: cannot create a lease node under " + s.dir + ": " + error_text(rc));
    }
    ZkLease lease{.path = created, .czxid = st.czxid, .session = h->session};
    const std::string mine = lease.path.substr(lease.path.rfind('/') + 1);
    auto leave = [&] { zoo_delete(h->zh, lease.path.c_str(), -1); };
    for (;;) {
        long seen;
        {
            MutexLock lock(s.mu);
            seen = s.child_changes;
            if (s.closing) {
                leave();
                throw ConfigError("Semaphore", "acquire on a semaphore being destroyed");
            }
        }
        std::vector<std::string> children;
        try {
            children = s.list(h->zh, true);
        } catch (...) {
            leave();
            throw;
        }
        const auto at = std::find(children.begin(), children.end(), mine);
        if (at == children.end()) {
            throw ConnectionError("ZooKeeper semaphore: the lease node vanished while waiting (the session ended)");
        }
        if (at - children.begin() < s.permits) return lease;
        if (Clock::now() >= deadline) {
            leave();
            return std::nullopt;
        }
        MutexLock lock(s.mu);
        while (s.child_changes == seen && !s.closing && !s.expired) {
            if (s.changed.wait_until(s.mu, deadline) == std::cv_status::timeout) break;
        }
        if (s.expired) {
            throw ConnectionError("ZooKeeper semaphore: the session expired while waiting for a permit");
        }
    }
}

void ZooKeeperSemaphore::abandon_session(std::uint64_t session) {
    std::shared_ptr<ZkHandle> old;
    {
        MutexLock lock(state_->mu);
        if (!state_->current || state_->current->session != session) return;
        old = std::move(state_->current);
        state_->current.reset();
        state_->live = nullptr;
        state_->expired = false;
        state_->disconnected_since = {};
        state_->changed.notify_all();
    }
    // Closing ends the session at the ensemble if it is reachable (its lease nodes go at once),
    // else the ensemble expires it; either way no node of it outlives the reported loss for long.
    old.reset();
}

bool ZooKeeperSemaphore::release(const ZkLease& lease) {
    std::shared_ptr<ZkHandle> h;
    {
        MutexLock lock(state_->mu);
        h = state_->current;
        // A node created before the last expiry was deleted by the ensemble with its ZooKeeper session.
        if (!h || h->session != lease.session || state_->expired) return false;
    }
    const int rc = zoo_delete(h->zh, lease.path.c_str(), -1);
    if (rc == ZOK) return true;
    if (rc == ZNONODE) return false;
    throw ConnectionError("ZooKeeper semaphore: cannot delete " + lease.path + ": " + error_text(rc));
}

int ZooKeeperSemaphore::children() {
    const auto h = state_->handle();
    return static_cast<int>(state_->list(h->zh, false).size());
}

ZkSessionHealth ZooKeeperSemaphore::health() {
    std::shared_ptr<ZkHandle> probe;  // declared first: dropped (and maybe closed) after the lock
    ZkSessionHealth out = health_now(probe);
    if (probe) state_->heard.probe(probe->zh, state_->dir, probe->session);
    return out;
}

ZkSessionHealth ZooKeeperSemaphore::health_now(std::shared_ptr<ZkHandle>& probe) {
    MutexLock lock(state_->mu);
    ZkSessionHealth out;
    out.session = state_->current ? state_->current->session : 0;
    out.expired = state_->expired;
    const auto timeout = state_->current && state_->current->zh ? milliseconds(zoo_recv_timeout(state_->current->zh))
                                                                : state_->zk.session_timeout;
    // Or silent for a whole T: the ensemble may have expired the session by now.
    out.unreachable = (state_->disconnected_since != Clock::time_point{} &&
                       Clock::now() - state_->disconnected_since >= timeout / 3) ||
                      (state_->current && Clock::now() >= state_->heard.kept_until(timeout, Clock::duration::zero()));
    // Keeps last heard fresh for session_bound.
    if (state_->current && state_->current->zh && !state_->expired) {
        probe = state_->current;
    }
    return out;
}

std::function<Clock::time_point()> ZooKeeperSemaphore::session_bound(std::uint64_t session,
                                                                     milliseconds margin) const {
    return [weak = std::weak_ptr<State>(state_), session, margin]() -> Clock::time_point {
        const auto s = weak.lock();
        if (!s) return Clock::time_point::min();
        MutexLock lock(s->mu);
        if (s->expired || !s->current || s->current->session != session) return Clock::time_point::min();
        const milliseconds timeout = s->timeout_now();
        // The ensemble expires the session T after it last heard from this client, however late
        // the client library declares the disconnection; the disconnection's own bound as well.
        const Clock::time_point heard_bound = s->heard.kept_until(timeout, margin);
        if (s->disconnected_since == Clock::time_point{}) return heard_bound;
        return std::min(heard_bound, s->disconnected_since + timeout / 3 - margin);
    };
}

std::chrono::milliseconds ZooKeeperSemaphore::session_timeout() const {
    MutexLock lock(state_->mu);
    return state_->current && state_->current->zh ? milliseconds(zoo_recv_timeout(state_->current->zh))
                                                  : state_->zk.session_timeout;
}

}  // namespace lockstep::detail

#endif  // LOCKSTEP_HAVE_ZOOKEEPER
