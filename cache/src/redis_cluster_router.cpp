#include "redis_cluster_router.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "lockstep/cache/cluster_unavailable_error.h"
#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"
#include "node_address.h"
#include "router_retry.h"

namespace lockstep::detail {
namespace {

using Clock = std::chrono::steady_clock;

// "MOVED 3999 127.0.0.1:6381" -> "127.0.0.1:6381".
std::string redirect_target(const std::string& message) {
    const auto space = message.rfind(' ');
    return space == std::string::npos ? std::string{} : message.substr(space + 1);
}

bool is_moved(const RedisReply& r) { return is_error_reply(r, "MOVED "); }
bool is_ask(const RedisReply& r) { return is_error_reply(r, "ASK "); }
// The command did not run and will succeed once the cluster has settled.
bool is_transient(const RedisReply& r) {
    return is_error_reply(r, "TRYAGAIN") || is_error_reply(r, "CLUSTERDOWN") || is_error_reply(r, "MASTERDOWN");
}
bool is_redirection(const RedisReply& r) { return is_moved(r) || is_ask(r) || is_transient(r); }

RedisOptions node_options(const RedisOptions& cluster, const std::string& host, int port) {
    RedisOptions o = cluster;
    o.topology = RedisTopology::Standalone;
    o.nodes.clear();
    // The address the server announced, or what the client must use instead (address_map).
    const RedisEndpoint target = mapped_address(o, host, port);
    o.host = target.host;
    o.port = target.port;
    // pool_check_idle_after is kept: only Call::Read lends use it. Everything else is lent with
    // Lend::Checked (a failover closes clients on the nodes that change role, and the routing's
    // retry must see a dead connection before a write is sent on it: docs/cache.md).
    return o;
}

// Backoff between retries while a failover runs: short first (a MOVED race settles at once),
// capped so a 3 s failover wait costs a few dozen probes, not thousands.
// How often the watch thread asks for the map while a master-change listener is registered: a
// failover is reported at most this long after the cluster finished it (one CLUSTER SLOTS a
// second per client with a lock client on it).
constexpr std::chrono::milliseconds kMasterWatchInterval{1000};

}  // namespace

RedisClusterRouter::RedisClusterRouter(RedisOptions options) : options_(std::move(options)) {
    if (options_.nodes.empty()) throw ConfigError("nodes", "a Redis Cluster client needs at least one seed node");
}

RedisClusterRouter::~RedisClusterRouter() {
    std::thread watch;
    {
        MutexLock lock(listeners_mutex_);
        stopping_ = true;
        watch = std::move(watch_);
    }
    watch_cv_.notify_all();
    if (watch.joinable()) watch.join();
}

RedisConnectionPool& RedisClusterRouter::pool_for(const std::string& address) {
    {
        ReaderMutexLock lock(mutex_);
        if (auto it = pools_.find(address); it != pools_.end()) return *it->second;
    }
    const NodeAddress node = split_address(address);
    WriterMutexLock lock(mutex_);
    auto& slot = pools_[address];
    if (!slot) {
        slot = std::make_unique<RedisConnectionPool>(node_options(options_, node.host, node.port));
        addresses_[slot.get()] = address;
    }
    return *slot;
}

void RedisClusterRouter::refresh() {
    std::vector<int> replaced;
    std::vector<std::string> masters;  // set when the map changed
    {
        MutexLock serial(refresh_mutex_);
        const std::uint64_t changes = map_changes_;
        replaced = load_map();
        if (map_changes_ != changes) {
            ReaderMutexLock lock(mutex_);
            for (auto* p : masters_) masters.push_back(addresses_.at(p));
        }
    }
    // Outside every router lock: a listener may run commands through this router.
    if (!replaced.empty()) tell_listeners(std::move(replaced));
    if (!masters.empty()) {
        std::vector<MapChangeListener> listeners;
        {
            MutexLock lock(listeners_mutex_);
            for (const auto& [id, l] : map_listeners_) listeners.push_back(l);
        }
        for (const auto& l : listeners) l(masters);
    }
}

std::vector<int> RedisClusterRouter::load_map() {
    // Ask the masters we know first (they are the live view), then the seeds.
    std::vector<std::string> candidates;
    if (map_connection_) candidates.push_back(map_connection_address_);  // the last one that answered
    {
        ReaderMutexLock lock(mutex_);
        for (auto* p : masters_) candidates.push_back(addresses_.at(p));
    }
    for (const auto& seed : options_.nodes) candidates.push_back(seed.host + ":" + std::to_string(seed.port));

    std::string last_error = "no node to ask";
    for (const auto& address : candidates) {
        if (auto reply = ask_for_slots(address, last_error)) return install_map(*reply, address);
    }
    throw ConnectionError("no Redis Cluster node answered CLUSTER SLOTS; last error: " + last_error);
}

std::optional<RedisReply> RedisClusterRouter::ask_for_slots(const std::string& address, std::string& error) {
    RedisReply reply;
    try {
        const NodeAddress node = split_address(address);
        if (!map_connection_ || map_connection_address_ != address) {
            map_connection_.reset();
            map_connection_ = std::make_unique<RedisConnection>(node_options(options_, node.host, node.port));
            map_connection_address_ = address;
        }
        reply = map_connection_->command({"CLUSTER", "SLOTS"});
        if (map_connection_->broken()) map_connection_.reset();
    } catch (const ConfigError&) {
        // A certificate that fails verification, an unreadable TLS file: asking another node
        // or waiting for a failover will not fix it (docs/tls.md).
        map_connection_.reset();
        throw;
    } catch (const Error& e) {
        map_connection_.reset();
        error = e.what();
        return std::nullopt;
    }
    if (reply.is_error() || reply.type() != RedisReply::Type::Array) {
        map_connection_.reset();  // ask another node next time
        error = address + " answered CLUSTER SLOTS with " +
                (reply.is_error() ? reply.error_message() : std::string(reply.type_name()));
        return std::nullopt;
    }
    return reply;
}

std::vector<int> RedisClusterRouter::install_map(const RedisReply& slots, const std::string& address) {
    const std::string host = split_address(address).host;
    // Build the new table before taking the write lock: readers are blocked only for the swap.
    std::array<RedisConnectionPool*, kRedisClusterSlots> table{};
    std::vector<RedisConnectionPool*> masters;
    std::size_t covered = 0;
    for (const auto& range : slots.elements()) {
        const auto& r = range.elements();
        if (r.size() < 3) continue;
        const auto& master = r[2].elements();
        std::string master_host = master.at(0).str();
        if (master_host.empty() || master_host == "?") master_host = host;  // "unknown endpoint": the one we asked
        RedisConnectionPool* pool = &pool_for(master_host + ":" + std::to_string(master.at(1).integer()));
        const long long lo = r[0].integer(), hi = r[1].integer();
        for (long long s = std::max(0LL, lo); s <= hi && s < kRedisClusterSlots; ++s) table[s] = pool;
        covered += static_cast<std::size_t>(hi - lo + 1);
        if (std::find(masters.begin(), masters.end(), pool) == masters.end()) masters.push_back(pool);
    }
    // Replaced masters: the slot's last owner is another node and serves no slot now.
    std::vector<int> replaced;
    std::map<std::pair<RedisConnectionPool*, RedisConnectionPool*>, int> moves;  // (was, now) -> slots
    for (int s = 0; s < kRedisClusterSlots; ++s) {
        RedisConnectionPool* was = last_owner_[s];
        RedisConnectionPool* now = table[s];
        if (now == nullptr) continue;
        last_owner_[s] = now;
        if (was == nullptr || was == now || std::find(masters.begin(), masters.end(), was) != masters.end()) continue;
        replaced.push_back(s);
        ++moves[{was, now}];
    }
    {
        WriterMutexLock lock(mutex_);
        if (slots_ != table || masters_ != masters) ++map_changes_;
        slots_ = table;
        masters_ = std::move(masters);
        for (const auto& [pair, count] : moves) {
            logger()->warn("Redis Cluster: master {} replaced by {} for {} slot(s) (failover)", addresses_.at(pair.first),
                           addresses_.at(pair.second), count);
        }
    }
    stale_.store(false);
    if (covered < kRedisClusterSlots) {
        logger()->warn("Redis Cluster map from {} covers {} of {} slots", address, covered, kRedisClusterSlots);
    }
    return replaced;
}

void RedisClusterRouter::tell_listeners(std::vector<int> replaced) {
    RedisMasterChange change;
    change.every_key = false;
    change.slots = std::move(replaced);
    std::vector<MasterChangeListener> listeners;
    {
        MutexLock lock(listeners_mutex_);
        for (const auto& [id, l] : listeners_) listeners.push_back(l);
    }
    for (const auto& l : listeners) {
        try {
            l(change);
        } catch (const std::exception& e) {
            logger()->error("Redis Cluster master-change listener threw: {}", e.what());
        }
    }
}

std::uint64_t RedisClusterRouter::add_master_change_listener(MasterChangeListener listener) {
    MutexLock lock(listeners_mutex_);
    const std::uint64_t id = next_listener_++;
    listeners_.emplace(id, std::move(listener));
    if (!watch_.joinable()) watch_ = std::thread([this] { watch_loop(); });
    return id;
}

void RedisClusterRouter::remove_master_change_listener(std::uint64_t id) {
    MutexLock lock(listeners_mutex_);
    listeners_.erase(id);
    map_listeners_.erase(id);
}

std::uint64_t RedisClusterRouter::add_map_change_listener(MapChangeListener listener) {
    MutexLock lock(listeners_mutex_);
    const std::uint64_t id = next_listener_++;
    map_listeners_.emplace(id, std::move(listener));
    if (!watch_.joinable()) watch_ = std::thread([this] { watch_loop(); });
    return id;
}

// Asks for the map every kMasterWatchInterval while someone listens: nothing else refreshes it
// when no command reaches the failed shard (a hold's renewal may be many seconds away).
void RedisClusterRouter::watch_loop() {
    for (;;) {
        {
            MutexLock lock(listeners_mutex_);
            if (!stopping_) watch_cv_.wait_for(listeners_mutex_, kMasterWatchInterval);
            if (stopping_) return;
            if (listeners_.empty() && map_listeners_.empty()) continue;
        }
        refresh_quietly();
    }
}

void RedisClusterRouter::refresh_quietly() noexcept {
    try {
        refresh();
    } catch (const std::exception& e) {
        logger()->debug("Redis Cluster map refresh failed: {}", e.what());
    }
}

RedisConnectionPool* RedisClusterRouter::owner(std::optional<int> slot) {
    if (stale_.load(std::memory_order_relaxed)) {
        try {
            refresh();
        } catch (const ConfigError&) {
            throw;  // see ask_for_slots: the caller learns the cause now, not after failover_wait
        } catch (const std::exception& e) {
            logger()->debug("Redis Cluster map refresh failed: {}", e.what());
            MutexLock lock(refresh_error_mutex_);
            refresh_error_ = e.what();
        }
    }
    ReaderMutexLock lock(mutex_);
    if (slot) return slots_[static_cast<std::size_t>(*slot)];
    if (masters_.empty()) return nullptr;
    return masters_[next_any_.fetch_add(1, std::memory_order_relaxed) % masters_.size()];
}

void RedisClusterRouter::unavailable(const std::string& why) const {
    throw ClusterUnavailableError("Redis Cluster unavailable for " + std::to_string(options_.failover_wait.count()) +
                                  " ms (failover_wait): " + why);
}

RedisReply RedisClusterRouter::run(std::optional<int> slot, const std::function<RedisReply(RedisConnection&)>& call,
                                   Call kind) {
    const auto deadline = Clock::now() + options_.failover_wait;
    std::string ask_target;
    int redirects = 0;
    // Read: the first lend may skip looks_alive(); after a ConnectionError on it, every lend is
    // checked (at most one read is re-sent, as RedisClient::get does on one node).
    auto lend = kind == Call::Read ? RedisConnectionPool::Lend::Default : RedisConnectionPool::Lend::Checked;
    for (int attempt = 0;; ++attempt) {
        RedisConnectionPool* pool = ask_target.empty() ? owner(slot) : &pool_for(ask_target);
        if (pool == nullptr) {
            // No master serves the slot in our map: refresh and wait for the cluster to settle.
            if (Clock::now() > deadline) {
                std::string why = "no master serves slot " + (slot ? std::to_string(*slot) : "(any)");
                MutexLock lock(refresh_error_mutex_);
                // The cause, when the map could not be asked for (e.g. "TLS handshake failed").
                if (!refresh_error_.empty()) why += "; the last map refresh failed: " + refresh_error_;
                unavailable(why);
            }
            back_off_before_retry(attempt);
            stale_.store(true);
            continue;
        }
        std::optional<PooledRedisConnection> conn;
        try {
            conn.emplace(pool->acquire(ask_target.empty() ? lend : RedisConnectionPool::Lend::Checked));
        } catch (const ConnectionError& e) {
            // Not connected: the command was never sent. The master may be dead and its replica
            // about to be promoted; the next map says so.
            if (Clock::now() > deadline) unavailable(e.what());
            back_off_before_retry(attempt);
            stale_.store(true);
            ask_target.clear();
            continue;
        }
        RedisReply reply;
        try {
            if (!ask_target.empty()) {
                // ASKING applies to the next command on this connection only.
                (*conn)->command({"ASKING"}).throw_if_error();
            }
            reply = call(**conn);
        } catch (const TimeoutError&) {
            stale_.store(true);  // a node that does not answer is not asked twice
            throw;
        } catch (const ConnectionError&) {
            stale_.store(true);  // a node died mid-call: the next call looks at the map again
            // A read lent without the check, on a connection the server closed since its last
            // use (a failover, a restart, CLIENT KILL): it changes nothing, so it runs once
            // more, through the refreshed map, on a checked lend. Writes were lent checked and
            // are never re-sent: the error says they may have been applied.
            if (!conn->lent_unchecked()) throw;
            lend = RedisConnectionPool::Lend::Checked;
            ask_target.clear();
            continue;
        }
        ask_target.clear();
        if (!reply.is_error()) return reply;
        if (is_moved(reply) || is_ask(reply)) {
            if (++redirects > 16) throw ProtocolError("Redis Cluster redirected one command 16 times: " + reply.error_message());
            if (is_ask(reply)) {
                ask_target = redirect_target(reply.error_message());
            } else {
                refresh_quietly();
            }
            continue;
        }
        if (is_transient(reply)) {
            if (Clock::now() > deadline) unavailable(reply.error_message());
            back_off_before_retry(attempt);
            stale_.store(true);
            continue;
        }
        return reply;
    }
}

std::vector<RedisReply> RedisClusterRouter::pipeline(const std::vector<std::vector<std::string>>& commands) {
    std::vector<RedisReply> replies(commands.size());
    std::vector<std::optional<int>> slots(commands.size());
    std::map<RedisConnectionPool*, std::vector<std::size_t>> groups;
    std::vector<bool> retry(commands.size(), false);
    for (std::size_t i = 0; i < commands.size(); ++i) {
        if (commands[i].empty()) throw ConfigError("pipeline", "command " + std::to_string(i) + " is empty");
        slots[i] = redis_command_slot(commands[i]);
        if (RedisConnectionPool* pool = owner(slots[i])) {
            groups[pool].push_back(i);
        } else {
            retry[i] = true;
        }
    }
    for (const auto& [pool, indexes] : groups) {
        std::optional<PooledRedisConnection> conn;
        try {
            conn.emplace(pool->acquire(RedisConnectionPool::Lend::Checked));
        } catch (const ConnectionError&) {
            for (std::size_t i : indexes) retry[i] = true;  // never sent: retried one by one below
            stale_.store(true);
            continue;
        }
        std::vector<std::vector<std::string>> batch;
        batch.reserve(indexes.size());
        for (std::size_t i : indexes) batch.push_back(commands[i]);
        std::vector<RedisReply> answered;
        try {
            answered = (*conn)->pipeline(batch);
        } catch (const ConnectionError&) {
            stale_.store(true);
            throw;
        }
        for (std::size_t k = 0; k < indexes.size(); ++k) {
            replies[indexes[k]] = std::move(answered[k]);
            if (is_redirection(replies[indexes[k]])) retry[indexes[k]] = true;
        }
    }
    // Redirected commands did not run; in input order, each goes through the full routing.
    for (std::size_t i = 0; i < commands.size(); ++i) {
        if (!retry[i]) continue;
        replies[i] = run(slots[i], [&](RedisConnection& c) { return c.command(commands[i]); });
    }
    return replies;
}

std::vector<RedisReply> RedisClusterRouter::on_every_master(const std::vector<std::string>& args) {
    if (stale_.load()) refresh_quietly();
    std::vector<RedisConnectionPool*> masters;
    {
        ReaderMutexLock lock(mutex_);
        masters = masters_;
    }
    if (masters.empty()) unavailable("no master in the slot map");
    std::vector<RedisReply> replies;
    for (RedisConnectionPool* pool : masters) {
        replies.push_back(pool->acquire(RedisConnectionPool::Lend::Checked)->command(args));
    }
    return replies;
}

PooledRedisConnection RedisClusterRouter::connection(std::optional<int> slot) {
    const auto deadline = Clock::now() + options_.failover_wait;
    for (int attempt = 0;; ++attempt) {
        if (RedisConnectionPool* pool = owner(slot)) {
            try {
                return pool->acquire(RedisConnectionPool::Lend::Checked);
            } catch (const ConnectionError& e) {
                if (Clock::now() > deadline) unavailable(e.what());
            }
        } else if (Clock::now() > deadline) {
            unavailable("no master serves the slot");
        }
        stale_.store(true);
        back_off_before_retry(attempt);
    }
}

RedisPoolStats RedisClusterRouter::stats() const {
    ReaderMutexLock lock(mutex_);
    RedisPoolStats sum;
    for (const auto& [address, pool] : pools_) {
        const RedisPoolStats s = pool->stats();
        sum.open += s.open;
        sum.idle += s.idle;
        sum.created += s.created;
        sum.discarded += s.discarded;
        sum.wait_timeouts += s.wait_timeouts;
        sum.lent_unchecked += s.lent_unchecked;
        sum.waiting += s.waiting;
    }
    return sum;
}

RedisOptions RedisClusterRouter::master_options(int slot) {
    std::string address = master_of(slot);
    if (address.empty()) {
        refresh();
        address = master_of(slot);
    }
    if (address.empty()) throw ConnectionError("redis cluster: no master serves slot " + std::to_string(slot));
    const NodeAddress node = split_address(address);
    return node_options(options_, node.host, node.port);
}

std::string RedisClusterRouter::master_of(int slot) {
    if (stale_.load()) refresh_quietly();
    ReaderMutexLock lock(mutex_);
    RedisConnectionPool* pool = slots_.at(static_cast<std::size_t>(slot));
    return pool ? addresses_.at(pool) : std::string{};
}

}  // namespace lockstep::detail
