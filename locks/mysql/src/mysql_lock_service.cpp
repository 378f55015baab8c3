// MysqlLockService: GET_LOCK on a pinned session, a counter row for fencing tokens, and a
// watchdog that keeps pinned sessions alive and finds the ones that died. The hold flow
// (reentrancy, typed errors, loss reporting) is hold_table.h's, shared with every backend.
#include "lockstep/locks/mysql_lock_service.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "hold_table.h"
#include "hold_table_mutex.h"
#include "lockstep/core/names.h"
#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"
#include "lockstep/core/mutex.h"
#include "lockstep/db/mysql_connection.h"
#include "lockstep/locks/lock_errors.h"

namespace lockstep {

using HoldRecord = locks_detail::Hold;  // lockstep::Hold is the movable value (hold.h)
using locks_detail::HoldKind;
using locks_detail::SteadyClock;
using locks_detail::SteadyTime;
using namespace std::chrono_literals;

namespace {

// MySQL 5.7+ refuses lock names longer than 64 characters (MariaDB allows 192): stay within both.
constexpr std::size_t kMaxLockName = 64;
// The client library's "Lost connection to server during query": its read timeout ran out.
constexpr int kClientLostConnection = 2013;

std::uint64_t fnv1a(std::string_view s, std::uint64_t seed) {
    std::uint64_t h = seed;
    for (unsigned char c : s) {
        h ^= c;
        h *= 0x100000001b3ULL;
    }
    return h;
}

// One connection that a hold pins for its lifetime. `mu` serialises the holder's release and
// the watchdog's check; `conn` is null once the session was closed or found dead.
struct Session {
    std::int64_t connection_id = 0;  // CONNECTION_ID(), for KILL QUERY when the service goes
    // The connection's read timeout (keepalive_read_timeout): fixed when it was opened.
    std::chrono::milliseconds read_timeout{0};
    Mutex mu;
    std::unique_ptr<MysqlConnection> conn GUARDED_BY(mu);
    long long wait_timeout_s GUARDED_BY(mu) = 0;  // the session's wait_timeout as last set
};

struct MysqlHold {
    std::shared_ptr<Session> session;
    std::string lock_name;
    // Set (under session->mu) once release() or abandon() has the session: from then on the
    // watchdog leaves it alone. Without it a watchdog that listed the hold just before its
    // release would find the lock released, report a loss nobody had, and could reset the
    // connection of a session already back in the idle list. Guarded by session->mu.
    bool ended = false;
};

bool is_connection_failure(const DbError& e) { return e.recovery() == Recovery::RetryCall; }

// GET_LOCK and the fencing token in one statement, with no row written: the token is the
// server's UUID_SHORT() without its server-id byte, i.e. (start-up time in seconds << 24) + a
// global counter the server increments under a mutex at every call. CASE evaluates GET_LOCK once
// and its THEN branch only when the lock is held, so every token of a name is drawn while its
// lock is held, after every token of the holds before it: strictly increasing within one server
// run. Across a restart the start-up seconds grow (docs/locks.md, "Fencing tokens": the clock
// would have to step back past the previous start-up), which the epoch guard below checks.
// Result: the token (> 0) when it got the lock, 0 when the wait ran out, -1 for GET_LOCK's NULL.
constexpr const char* kAcquire =
    "SELECT CASE GET_LOCK(?, ?) WHEN 1 THEN CAST(UUID_SHORT() & 0x00FFFFFFFFFFFFFF AS SIGNED) "
    "WHEN 0 THEN 0 ELSE -1 END AS token";

// The epoch guard: one row holding a token drawn at the first session opened in each server run
// (replicated and durable, InnoDB). A new session whose first token is not above it is on a
// server whose UUID_SHORT() went back (its clock stepped back past its previous start-up, or a
// fail-over to a server started earlier): its tokens could repeat older ones, so it is refused.
constexpr const char* kEpochTable =
    "CREATE TABLE IF NOT EXISTS lockstep_lock_epoch (id TINYINT UNSIGNED NOT NULL PRIMARY KEY, "
    "high BIGINT NOT NULL) ENGINE=InnoDB";

}  // namespace

struct MysqlLockService::State : locks_detail::HoldBackend {
    std::string_view backend_name() const noexcept override { return "mysql"; }
    State(MysqlOptions m, LockServiceOptions o)
        : mysql(std::move(m)), prefix(std::move(o.prefix)), table(locks_detail::random_hex_id(), std::move(o.on_lost), *this) {}

    MysqlOptions mysql;
    std::string prefix;
    locks_detail::HoldTable table;

    Mutex mu;
    // Sessions of released holds, by read timeout (milliseconds), for the next hold.
    std::map<long long, std::vector<std::shared_ptr<Session>>> idle GUARDED_BY(mu);
    MysqlLockStats stats GUARDED_BY(mu);
    CondVar wake;
    bool stopping GUARDED_BY(mu) = false;
    // The service is gone (close()): no GET_LOCK starts any more, and the ones under way are
    // ended with KILL QUERY on their sessions (`waiting`: their connection ids).
    bool closing GUARDED_BY(mu) = false;
    std::multiset<std::int64_t> waiting GUARDED_BY(mu);
    CondVar waiting_changed;
    std::chrono::milliseconds watchdog_period GUARDED_BY(mu){1000};  // what the watchdog sleeps now
    bool hold_needs_check GUARDED_BY(mu) = false;  // registered(): a pass now, not after the sleep
    std::thread watchdog;

    std::string server_name(const std::string& name) const {
        std::string full = prefix + name;
        if (full.size() <= kMaxLockName) return full;
        char hash[33];
        std::snprintf(hash, sizeof hash, "%016llx%016llx",
                      static_cast<unsigned long long>(fnv1a(full, 0xcbf29ce484222325ULL)),
                      static_cast<unsigned long long>(fnv1a(full, 0x84222325cbf29ce4ULL)));
        return full.substr(0, kMaxLockName - 33) + "#" + hash;
    }

    // The read timeout of a session pinned by a hold with `lease`: a third of the lease, at least
    // the 1 s that Connector/C++ can set (it takes whole seconds, at connect), at most the
    // service's. The watchdog's keepalive on a partitioned session then gives up well within the
    // lease instead of after the service's read timeout (30 s by default), so one silent session
    // does not hold up the checks (and so the validity) of every other hold, and the holder's
    // unlock into a partition returns as soon. lost() itself never waits for it: the validity
    // counts from each keepalive's send time (hold_table.h's expiry thread).
    std::chrono::milliseconds keepalive_read_timeout(std::chrono::milliseconds lease) const {
        auto t = std::max<std::chrono::milliseconds>(1s, std::chrono::floor<std::chrono::seconds>(lease / 3));
        if (mysql.read_timeout > 0ms) t = std::min(t, mysql.read_timeout);
        return t;
    }

    std::shared_ptr<Session> take_session(std::chrono::milliseconds read_timeout, bool fresh = false) EXCLUDES(mu) {
        {
            MutexLock g(mu);
            auto& list = idle[read_timeout.count()];
            if (!fresh && !list.empty()) {
                auto s = std::move(list.back());
                list.pop_back();
                return s;
            }
            ++stats.sessions_opened;
        }
        auto s = std::make_shared<Session>();
        s->read_timeout = read_timeout;
        MysqlOptions options = mysql;
        options.read_timeout = read_timeout;
        auto conn = std::make_unique<MysqlConnection>(options);
        s->connection_id = check_epoch(*conn);
        MutexLock g(s->mu);  // nobody else has it yet; taken for the analysis
        s->conn = std::move(conn);
        return s;
    }

    // The epoch guard (kEpochTable), before a new session's first token: refuses a server whose
    // tokens went back, and records this run's first token once per server run (a row write per
    // run, not per acquisition). Sessions are pooled, and every session on a restarted server is
    // a new one, so no token of a new run is drawn before this check. Returns the session's
    // CONNECTION_ID() (read in the same statement).
    std::int64_t check_epoch(MysqlConnection& c) EXCLUDES(mu) {
        auto row = c.query_one(
            "SELECT CAST(UUID_SHORT() & 0x00FFFFFFFFFFFFFF AS SIGNED) AS now_token, "
            "(SELECT high FROM lockstep_lock_epoch WHERE id = 1) AS high, CAST(CONNECTION_ID() AS SIGNED) AS id");
        const auto id = row ? row->get<std::optional<std::int64_t>>("id") : std::nullopt;
        const auto now = row ? row->get<std::optional<std::int64_t>>("now_token") : std::nullopt;
        const auto high = row ? row->get<std::optional<std::int64_t>>("high") : std::nullopt;
        if (!now) throw DbError("UUID_SHORT() returned NULL", 0, "HY000");
        if (high && *high >= *now) {
            MutexLock g(mu);
            ++stats.epoch_refusals;
            throw DbError("mysql locks: this server's fencing tokens went back (UUID_SHORT() is " + std::to_string(*now) +
                              ", a token of an earlier run was " + std::to_string(*high) +
                              "): its clock stepped back past its previous start-up, or it started before the server "
                              "it replaced; refusing to issue tokens that could repeat (docs/locks.md, MySQL)",
                          0, "HY000");
        }
        // The high 32 bits are the start-up seconds (plus the counter's carries): a new run.
        if (!high || (*now >> 24) > (*high >> 24)) {
            c.execute("INSERT INTO lockstep_lock_epoch (id, high) VALUES (1, ?) "
                      "ON DUPLICATE KEY UPDATE high = GREATEST(high, VALUES(high))",
                      {*now});
            MutexLock g(mu);
            ++stats.epoch_writes;
        }
        return id.value_or(0);
    }

    // wait_timeout = the lease: a stopped holder's session (and so its lock) ends this long
    // after its last statement; the watchdog's checks keep a live holder's session going.
    // Returns the number of statements sent (0 or 1).
    static int set_lease(Session& s, std::chrono::milliseconds lease) REQUIRES(s.mu) {
        const long long secs = std::max<long long>(1, (lease.count() + 999) / 1000);
        if (s.wait_timeout_s == secs) return 0;
        s.conn->execute_unprepared("SET SESSION wait_timeout = " + std::to_string(secs));
        s.wait_timeout_s = secs;
        return 1;
    }

    // One GET_LOCK wait at most this long: a longer one would outlast the read timeout (2013).
    static std::chrono::milliseconds max_chunk(const Session& s) {
        const auto rt = s.read_timeout;
        if (rt <= 0ms) return 10s;  // no read timeout: any chunk is safe; keep deadlines responsive
        return rt > 2s ? rt - 1s : rt / 2;
    }

    bool acquire(HoldRecord& h, SteadyTime deadline) override EXCLUDES(mu) {
        try {
            return acquire_on(take_session(keepalive_read_timeout(h.lease)), h, deadline);
        } catch (const ConnectionError&) {
            // An idle session the server closed meanwhile (wait_timeout, a restart, KILL): its
            // first statement fails (2006) before anything was held. Once more on a new one,
            // unless the service went (its close() ends waits by killing them).
            table.throw_if_closed();
            return acquire_on(take_session(keepalive_read_timeout(h.lease), true), h, deadline);
        }
    }

    // Invariant: every statement this acquisition sends is counted in `statements`, and added to
    // stats.acquire_statements once, however it ends (acquired, ran out of time, or DbError).
    bool acquire_on(std::shared_ptr<Session> session, HoldRecord& h, SteadyTime deadline) EXCLUDES(mu) {
        const std::string name = server_name(h.name);
        Session& s = *session;  // the analysis cannot see through shared_ptr
        std::uint64_t statements = 0;  // sent by this acquisition (stats.acquire_statements)
        try {
            MutexLock g(s.mu);
            statements += set_lease(s, h.lease);
            for (;;) {
                const double wait_s = chunk_seconds(s, deadline);
                SteadyTime sent;
                const std::int64_t token = get_lock_chunk(s, name, wait_s, sent, statements);
                if (token > 0) {
                    start_validity(s, h, token, sent, statements);
                    break;
                }
                if (SteadyClock::now() >= deadline || wait_s == 0.0) {
                    give_back_locked(session, s);
                    add_acquire_statements(statements);
                    return false;
                }
                MutexLock sg(mu);
                ++stats.wait_chunks;
            }
        } catch (const DbError& e) {
            add_acquire_statements(statements);
            {
                MutexLock g(s.mu);
                s.conn.reset();
            }
            if (is_connection_failure(e)) throw ConnectionError("MySQL lock '" + name + "': " + e.what());
            throw;
        }
        h.key = name;
        h.state = std::make_shared<MysqlHold>(MysqlHold{session, name});
        {
            MutexLock g(mu);
            ++stats.acquired;
            stats.acquire_statements += statements;
        }
        return true;
    }

    void add_acquire_statements(std::uint64_t statements) EXCLUDES(mu) {
        MutexLock g(mu);
        stats.acquire_statements += statements;
    }

    // The next GET_LOCK wait, in seconds: what is left to `deadline`, at most max_chunk.
    static double chunk_seconds(const Session& s, SteadyTime deadline) {
        // try_lock passes SteadyTime::min(): never subtract it (overflow), wait 0.
        const auto now = SteadyClock::now();
        const auto left = deadline == SteadyTime::max() ? max_chunk(s)
                          : deadline <= now ? 0ms
                          : std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
        return std::min(left, max_chunk(s)).count() / 1000.0;
    }

    // One GET_LOCK wait (kAcquire), with the session on the `waiting` list while it runs (close()
    // kills the waits on it). Returns the token when it got the lock, 0 when the wait ran out;
    // GET_LOCK's NULL (an error, e.g. the session was killed while it waited) is a DbError.
    // `sent` is when the statement went out.
    std::int64_t get_lock_chunk(Session& s, const std::string& name, double wait_s, SteadyTime& sent,
                                std::uint64_t& statements) REQUIRES(s.mu) EXCLUDES(mu) {
        ++statements;
        {
            MutexLock wg(mu);
            if (closing) table.throw_if_closed();
            waiting.insert(s.connection_id);
        }
        sent = SteadyClock::now();
        std::optional<Row> row;
        {
            struct Waiting {  // off the list once the statement returned or failed
                State& st;
                std::int64_t id;
                ~Waiting() {
                    {
                        MutexLock wg(st.mu);
                        st.waiting.erase(st.waiting.find(id));
                    }
                    st.waiting_changed.notify_all();
                }
            } on_list{*this, s.connection_id};
            row = s.conn->query_one(kAcquire, {name, wait_s});
        }
        // kAcquire: -1 for GET_LOCK's NULL.
        const auto token = row ? row->get<std::optional<std::int64_t>>("token") : std::nullopt;
        if (!token || *token < 0) throw DbError("GET_LOCK('" + name + "') returned NULL", 0, "HY000");
        return *token;
    }

    // The session's idle time (wait_timeout >= lease) starts after the GET_LOCK statement, so the
    // hold is valid from its send time. A GET_LOCK that waited long left little of that: one
    // statement more starts the count again (contended acquisitions only; an uncontended one costs
    // nothing more).
    static void start_validity(Session& s, HoldRecord& h, std::int64_t token, SteadyTime sent,
                               std::uint64_t& statements) REQUIRES(s.mu) {
        h.token = token;
        SteadyTime valid_from = sent;
        if (SteadyClock::now() - sent > h.lease / 3) {
            valid_from = SteadyClock::now();
            ++statements;
            s.conn->query_one("SELECT 1 AS alive");
        }
        h.valid_until.store(locks_detail::valid_until_from(valid_from, h.lease));
    }

    // Wakes the watchdog only when this hold needs checks sooner than it sleeps: waking it at
    // every acquisition made it check (a query on the pinned session) right then, and the
    // holder's release waited for that query (the lock cycle was 3.6x its floor). Here, after
    // the registration, not in acquire(): a pass woken before it would not see the hold and sleep
    // its old period, past the end of a short lease's validity.
    void registered(const HoldRecord& h) noexcept override EXCLUDES(mu) {
        {
            MutexLock g(mu);
            if (h.lease / 3 >= watchdog_period) return;
            hold_needs_check = true;
        }
        wake.notify_one();
    }

    // Back to the idle list if its connection can be reused. `s` is `session`, whose mutex the
    // caller holds (a separate reference because the analysis cannot see through shared_ptr).
    void give_back_locked(const std::shared_ptr<Session>& session, Session& s) REQUIRES(s.mu) EXCLUDES(mu) {
        if (!s.conn || !s.conn->reusable()) return;
        MutexLock g(mu);
        auto& list = idle[s.read_timeout.count()];
        if (list.size() < 16) list.push_back(session);
    }

    bool release(HoldRecord& h) override EXCLUDES(mu) {
        auto mh = std::static_pointer_cast<MysqlHold>(h.state);
        Session& s = *mh->session;
        MutexLock g(s.mu);
        mh->ended = true;  // the watchdog leaves it alone from now on (even once it is idle again)
        if (!s.conn) return false;  // the watchdog found the session dead
        try {
            auto row = s.conn->query_one("SELECT RELEASE_LOCK(?) AS released", {mh->lock_name});
            const auto released = row ? row->get<std::optional<std::int64_t>>("released") : std::nullopt;
            if (released && *released == 1) {
                give_back_locked(mh->session, s);
                return true;
            }
            return false;  // 0: another session holds it; NULL: nobody does
        } catch (const DbError& e) {
            // The session broke: the server ended it and freed the lock with it.
            s.conn.reset();
            if (is_connection_failure(e)) return false;
            throw;
        }
    }

    void abandon(HoldRecord& h) noexcept override {
        auto mh = std::static_pointer_cast<MysqlHold>(h.state);
        if (!mh) return;
        Session& s = *mh->session;
        MutexLock g(s.mu);
        mh->ended = true;
        s.conn.reset();  // closing the session frees whatever it still holds
    }

    // The service's destructor. Holds reported lost (ClientClosed) and their sessions closed,
    // which frees their locks on the server (hold_table.h); then every GET_LOCK under way is ended
    // with KILL QUERY from a connection of our own, so its waiter leaves at once with
    // LockClientClosedError instead of waiting out its chunk (up to the read timeout) and
    // acquiring through a dead service. A KILL can reach a session just before its GET_LOCK
    // starts, which clears it: repeated until no waiter is left, within a bound (an unreachable
    // server ends the waits by its read timeout instead).
    void close() EXCLUDES(mu) {
        table.close(*this);
        std::map<long long, std::vector<std::shared_ptr<Session>>> idle_sessions;
        {
            MutexLock g(mu);
            closing = true;
            stopping = true;
            idle_sessions.swap(idle);
        }
        wake.notify_all();
        idle_sessions.clear();  // closes them
        std::unique_ptr<MysqlConnection> killer;
        const auto give_up = SteadyClock::now() + 2s;
        for (;;) {
            std::set<std::int64_t> ids;
            {
                MutexLock g(mu);
                ids.insert(waiting.begin(), waiting.end());
            }
            if (ids.empty() || SteadyClock::now() >= give_up) break;
            try {
                if (!killer) killer = std::make_unique<MysqlConnection>(mysql);
                for (const auto id : ids) killer->execute_unprepared("KILL QUERY " + std::to_string(id));
            } catch (const std::exception& e) {
                logger()->warn("mysql locks: ending the waits of a destroyed service failed ({}); they end at their "
                               "read timeout", e.what());
                break;
            }
            MutexLock g(mu);
            waiting_changed.wait_until(mu, std::min(give_up, SteadyClock::now() + 20ms));
        }
    }

    // ---- watchdog ----
    // Why the hold's session no longer holds its lock; empty while it does (or the hold ended).
    // `reason`: Expired when the server said so (or the session is gone), Unreachable when the
    // check got no answer in time: the session may live on at the server, but this client gives
    // it up (its connection is closed) and cannot know the hold is still its own.
    static std::string session_problem(MysqlHold& mh, Session& s, LockLossReason& reason) REQUIRES(s.mu) {
        reason = LockLossReason::Expired;
        if (mh.ended) return {};
        if (!s.conn) return "its session was closed";
        try {
            auto row = s.conn->query_one("SELECT IS_USED_LOCK(?) = CONNECTION_ID() AS mine", {mh.lock_name});
            const auto mine = row ? row->get<std::optional<std::int64_t>>("mine") : std::nullopt;
            if (mine && *mine == 1) return {};
            return "the session no longer holds the lock";
        } catch (const TimeoutError& e) {
            s.conn.reset();
            reason = LockLossReason::Unreachable;
            return std::string("its session did not answer in time (") + e.what() + ")";
        } catch (const DbError& e) {
            s.conn.reset();
            // 2013 (CR_SERVER_LOST): the client's read timeout ran out mid-query, no word from the server.
            if (e.code() == kClientLostConnection) reason = LockLossReason::Unreachable;
            return std::string("its session ended (") + e.what() + ")";
        } catch (const std::exception& e) {
            s.conn.reset();
            return std::string("its session ended (") + e.what() + ")";
        }
    }

    void check(const std::shared_ptr<HoldRecord>& h) EXCLUDES(mu) {
        if (h->lost.load()) return;
        auto mh = std::static_pointer_cast<MysqlHold>(h->state);
        Session& s = *mh->session;
        if (!s.mu.try_lock()) return;  // the holder is releasing it right now
        std::string why;
        LockLossReason reason = LockLossReason::Expired;
        const auto sent = SteadyClock::now();
        try {
            why = session_problem(*mh, s, reason);
        } catch (...) {  // only bad_alloc: session_problem handles the server's errors
            s.mu.unlock();
            throw;
        }
        s.mu.unlock();
        if (why.empty()) {
            // The check kept the session alive: its wait_timeout counts again from after `sent`.
            locks_detail::HoldTable::extend(*h, sent);
            return;
        }
        {
            MutexLock sg(mu);
            ++stats.losses;
        }
        table.report_lost(h, reason, why);
    }

    void run_watchdog() EXCLUDES(mu) {
        MutexLock g(mu);
        while (!stopping) {
            auto holds = table.all();
            std::chrono::milliseconds period = 1s;
            for (const auto& h : holds) period = std::min(period, std::max<std::chrono::milliseconds>(h->lease / 3, 10ms));
            g.unlock();
            for (const auto& h : holds) {
                if (h->kind != HoldKind::Mutex || !h->state) continue;
                check(h);
            }
            g.lock();
            stats.checks += holds.size();
            watchdog_period = period;
            const auto until = SteadyClock::now() + period;
            while (!stopping && !hold_needs_check) {
                if (wake.wait_until(mu, until) == std::cv_status::timeout) break;
            }
            hold_needs_check = false;
        }
    }
};

MysqlLockService::MysqlLockService(MysqlOptions mysql, LockServiceOptions options)
    : state_(std::make_shared<State>(std::move(mysql), std::move(options))) {
    // The epoch guard's table; the tokens themselves need no table and no stored routine, so
    // an account with no CREATE ROUTINE (nor SUPER, with the binary log on) fences the same way.
    MysqlConnection setup(state_->mysql);
    setup.execute_unprepared(kEpochTable);
    state_->watchdog = std::thread([s = state_.get()] { s->run_watchdog(); });
}

MysqlLockService::~MysqlLockService() {
    state_->close();
    state_->watchdog.join();
}

std::unique_ptr<DistributedMutex> MysqlLockService::make_mutex(std::string name, LockOptions options) {
    check_name("lock name", name);
    if (options.lease < 3ms) throw ConfigError("lease", "must be at least 3ms");
    return std::make_unique<locks_detail::HoldTableMutex<MysqlLockService::State>>(state_, std::move(name), std::move(options), "MySQL lock");
}

std::unique_ptr<DistributedReadWriteLock> MysqlLockService::make_read_write_lock(std::string, LockOptions) {
    throw ConfigError("lock service", "the mysql backend has no read-write lock (GET_LOCK has no shared mode)");
}

std::string MysqlLockService::lock_name(const std::string& name) const { return state_->server_name(name); }

std::chrono::system_clock::time_point MysqlLockService::server_time() {
    auto session = state_->take_session(state_->mysql.read_timeout);
    Session& s = *session;  // the analysis cannot see through shared_ptr
    MutexLock g(s.mu);
    auto row = s.conn->query_one(
        "SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) AS us");
    state_->give_back_locked(session, s);
    const auto us = row ? row->get<std::optional<std::int64_t>>("us") : std::nullopt;
    if (!us) throw DbError("UTC_TIMESTAMP(6) returned NULL", 0, "HY000");
    return std::chrono::system_clock::time_point(std::chrono::microseconds(*us));
}

MysqlLockStats MysqlLockService::stats() const {
    MutexLock g(state_->mu);
    return state_->stats;
}

}  // namespace lockstep
