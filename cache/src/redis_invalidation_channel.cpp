// Per node, the subscriber thread owns one blocking connection in subscribe mode and waits in
// poll() on it and on a wake-up eventfd, never longer than a heartbeat. Each generation is one
// subscription: connect, CLIENT ID, SUBSCRIBE, (Broadcast) arm the beacon, then publish the new
// id and generation and drop the near cache (reads that began while the channel was down may
// have used a reader that redirects to the dead id). Readers remember the generation they were
// armed in; one from an older generation is closed instead of lent.
//
// Over a topology, the channel keeps one such node channel per node that serves keys, keyed by
// "host:port": Cluster from its own router's map (the router's map-change listener re-makes the
// set and drops), Sentinel from its own router's master (its switch listener does the same).
#include "lockstep/cache/redis_invalidation_channel.h"

#include <poll.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>

#include "hiredis_io.h"
#include "lockstep/cache/redis_cluster_slot.h"
#include "lockstep/cache/redis_connection.h"
#include "lockstep/core/error.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/core/logging.h"
#include "lockstep/core/mutex.h"
#include "node_address.h"
#include "redis_cluster_router.h"
#include "redis_sentinel_router.h"
#include "router_retry.h"
#include "unique_fd.h"

namespace lockstep {

namespace {
constexpr std::string_view kInvalidateChannel = "__redis__:invalidate";
constexpr std::chrono::milliseconds kMaxReconnectBackoff{1000};
constexpr int kSilentHeartbeats = 3;

struct Reader {
    std::unique_ptr<RedisConnection> conn;
    std::uint64_t generation = 0;
};
// One node's channel: its subscriber thread, its tracked readers (or beacon), their generation.
struct NodeChannel {
    using Clock = std::chrono::steady_clock;

    NodeChannel(RedisOptions r, NearCache& n, RedisTrackingOptions o)
        : redis(std::move(r)), near(n), options(std::move(o)), address(redis.host + ":" + std::to_string(redis.port)) {}
    NodeChannel(const NodeChannel&) = delete;
    NodeChannel& operator=(const NodeChannel&) = delete;
    ~NodeChannel() { stop(); }

    const RedisOptions redis;
    NearCache& near;
    const RedisTrackingOptions options;
    const std::string address;  // "host:port", for logs and the cluster map
    detail::UniqueFd wake_fd{::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};
    std::thread thread;
    mutable std::atomic<std::uint64_t> messages{0};

    mutable Mutex mutex;
    CondVar changed;
    bool stopping GUARDED_BY(mutex) = false;
    bool intact GUARDED_BY(mutex) = false;
    std::int64_t subscriber_id GUARDED_BY(mutex) = 0;
    std::uint64_t generation GUARDED_BY(mutex) = 0;
    std::uint64_t connects GUARDED_BY(mutex) = 0;
    std::string last_failure GUARDED_BY(mutex);
    std::vector<Reader> idle GUARDED_BY(mutex);
    // Readers of the current generation lent out or being made. With the idle ones, never more
    // than max_readers(): a reader is never closed to make room, since closing it would make the
    // server forget what it tracked.
    std::size_t lent GUARDED_BY(mutex) = 0;
    std::size_t max_readers() const { return std::max<std::size_t>(redis.pool_size, 1); }

    // The subscriber thread: subscribe, serve until the link fails, drop, back off, again.
    void run() EXCLUDES(mutex);
    void serve(RedisConnection& conn, RedisConnection* beacon) EXCLUDES(mutex);
    void handle(const RedisReply& reply, Clock::time_point& heard) const;
    // False when an idle tracked reader had been closed by the server (it is discarded).
    bool idle_readers_alive() EXCLUDES(mutex);
    void channel_lost(const std::string& why) EXCLUDES(mutex);
    // Ends the subscriber thread (joins it).
    void stop() EXCLUDES(mutex);
    void wake() const {
        const std::uint64_t one = 1;
        [[maybe_unused]] auto n = ::write(wake_fd.get(), &one, sizeof one);
    }
    void drain_wake() const {
        std::uint64_t value = 0;
        [[maybe_unused]] auto n = ::read(wake_fd.get(), &value, sizeof value);
    }
    bool should_stop() const EXCLUDES(mutex) {
        MutexLock lock(mutex);
        return stopping;
    }
    Reader take_reader() EXCLUDES(mutex);
    void give_back(Reader reader, bool failed) EXCLUDES(mutex);
    // A new connection named `name`, tracking redirected to `redirect` (Default), or announcing
    // the prefixes (Broadcast), or not tracking at all (`track` false).
    std::unique_ptr<RedisConnection> open(std::string_view name, std::int64_t redirect, bool track,
                                          bool broadcast) const;

    // Starts the subscriber thread (subscribed later: see wait_intact()).
    void start() {
        if (wake_fd.get() < 0) throw ConnectionError("near cache: eventfd failed");
        thread = std::thread([this] { run(); });
    }
    // Until the channel is intact or `deadline`; false (and why) on the deadline.
    bool wait_intact(Clock::time_point deadline, std::string& why) EXCLUDES(mutex) {
        MutexLock lock(mutex);
        while (!intact && Clock::now() < deadline) changed.wait_until(mutex, deadline);
        if (intact) return true;
        why = address + ": " + (last_failure.empty() ? "not subscribed in time" : last_failure);
        return false;
    }
    bool is_intact() const EXCLUDES(mutex) {
        MutexLock lock(mutex);
        return intact;
    }
    std::int64_t id() const EXCLUDES(mutex) {
        MutexLock lock(mutex);
        return subscriber_id;
    }
    std::uint64_t subscriptions() const EXCLUDES(mutex) {
        MutexLock lock(mutex);
        return connects;
    }
    // GET on a tracked reader (Default) or any reader (Broadcast); the reply as it came.
    RedisReply get(const std::string& key) EXCLUDES(mutex) {
        Reader reader = take_reader();
        RedisReply reply;
        try {
            reply = reader.conn->command({"GET", key});
        } catch (const Error&) {
            give_back(std::move(reader), true);
            throw;
        }
        give_back(std::move(reader), false);
        return reply;
    }
};

}  // namespace

std::unique_ptr<RedisConnection> NodeChannel::open(std::string_view name, std::int64_t redirect,
                                                                      bool track, bool broadcast) const {
    auto conn = std::make_unique<RedisConnection>(redis);
    conn->command({"CLIENT", "SETNAME", name}).throw_if_error();
    if (track) {
        std::vector<std::string> args{"CLIENT", "TRACKING", "on", "REDIRECT", std::to_string(redirect)};
        if (broadcast) {
            args.emplace_back("BCAST");
            for (const auto& p : options.prefixes) {
                args.emplace_back("PREFIX");
                args.push_back(p);
            }
        }
        const RedisReply r = conn->command(args);
        // The redirect target is gone (the subscriber dropped meanwhile): not armed.
        if (r.is_error()) throw ConnectionError("near cache: CLIENT TRACKING refused: " + r.error_message());
    }
    return conn;
}

void NodeChannel::channel_lost(const std::string& why) {
    bool was_intact = false;
    {
        MutexLock lock(mutex);
        was_intact = intact;
        intact = false;
        subscriber_id = 0;
        last_failure = why;
        idle.clear();
    }
    // Every failed attempt drops again: cheap on an empty cache, and it keeps the rule simple
    // (nothing filled while down survives the next attempt either).
    near.drop("invalidation channel lost: " + why);
    if (was_intact) logger()->warn("near cache: invalidation channel of {} lost ({}); dropped, reconnecting", address, why);
}

void NodeChannel::run() {
    auto backoff = options.reconnect_backoff;
    while (!should_stop()) {
        std::unique_ptr<RedisConnection> conn;
        std::unique_ptr<RedisConnection> beacon;
        try {
            conn = open("lockstep-near-subscriber", 0, false, false);
            const std::int64_t id = conn->command({"CLIENT", "ID"}).throw_if_error().integer();
            // Tests hold the resubscription here to let writes happen while the channel is down.
            fault::point("near.before_subscribe");
            conn->command({"SUBSCRIBE", kInvalidateChannel}).throw_if_error();
            if (options.mode == TrackingMode::Broadcast) beacon = open("lockstep-near-beacon", id, true, true);
            bool first = false;
            {
                MutexLock lock(mutex);
                if (stopping) return;
                subscriber_id = id;
                ++generation;
                first = connects++ == 0;
                intact = true;
                last_failure.clear();
                idle.clear();  // armed for the old generation
                lent = 0;      // readers of the old generation still out are closed when returned
            }
            changed.notify_all();
            // Reads that began while the channel was down may have used a reader of the old
            // generation: their fills must fail (C12).
            if (!first) near.drop("invalidation channel reconnected");
            backoff = options.reconnect_backoff;
            serve(*conn, beacon.get());
        } catch (const std::exception& e) {
            if (should_stop()) return;
            channel_lost(e.what());
        }
        if (should_stop()) return;
        {
            const auto until = Clock::now() + backoff;
            MutexLock lock(mutex);
            while (!stopping && Clock::now() < until) changed.wait_until(mutex, until);
        }
        backoff = std::min(backoff * 2, kMaxReconnectBackoff);
    }
}

void NodeChannel::serve(RedisConnection& conn, RedisConnection* beacon) {
    const detail::Transport t = conn.transport();
    redisContext* c = t.context;
    auto heard = Clock::now();
    auto pinged = heard;
    auto unanswered_since = Clock::time_point::max();  // the oldest PING sent since `heard`
    for (;;) {
        if (should_stop()) return;
        pollfd fds[2] = {{c->fd, POLLIN, 0}, {wake_fd.get(), POLLIN, 0}};
        // Decrypted TLS bytes are invisible to poll(): read them first.
        const bool buffered = detail::has_buffered_input(t);
        const int n = ::poll(fds, 2, buffered ? 0 : static_cast<int>(options.heartbeat.count()));
        if (n < 0 && errno != EINTR) throw ConnectionError("near cache: poll failed");
        if (n > 0 && (fds[1].revents & POLLIN) != 0) drain_wake();
        if (buffered || (n > 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0)) {
            if (!detail::read_input(t)) detail::throw_failure(c, "near cache subscriber: reading");
            for (;;) {
                void* raw = nullptr;
                if (redisGetReplyFromReader(c, &raw) != REDIS_OK) detail::throw_failure(c, "near cache subscriber: parsing");
                if (raw == nullptr) break;
                detail::ReplyPtr reply(static_cast<redisReply*>(raw));
                handle(detail::to_reply(*reply), heard);
            }
        }
        const auto now = Clock::now();
        if (heard >= unanswered_since) unanswered_since = Clock::time_point::max();
        // Silent: nothing heard for 3 heartbeats although a PING has waited a whole heartbeat for
        // its answer. A listener that itself ran late (a busy machine: its thread waited for a
        // CPU and sent no PING) asks first instead of dropping a healthy channel.
        if (now - heard > kSilentHeartbeats * options.heartbeat && unanswered_since != Clock::time_point::max() &&
            now - unanswered_since >= options.heartbeat) {
            // What arrived while this thread did not run (a stalled handler, a busy machine) is
            // read before the server is judged silent.
            pollfd pending{c->fd, POLLIN, 0};
            if (::poll(&pending, 1, 0) > 0) continue;
            throw ConnectionError("subscriber silent for 3 heartbeats");
        }
        if (now - pinged >= options.heartbeat) {
            pinged = now;
            if (unanswered_since == Clock::time_point::max()) unanswered_since = now;
            if (redisAppendCommand(c, "PING") != REDIS_OK || !detail::flush_output(t))
                detail::throw_failure(c, "near cache subscriber: PING");
            if (beacon != nullptr && !beacon->looks_alive()) throw ConnectionError("the tracking beacon was closed");
            if (!idle_readers_alive()) near.drop("an idle tracked reader was closed by the server");
        }
    }
}

void NodeChannel::handle(const RedisReply& reply, Clock::time_point& heard) const {
    heard = Clock::now();
    if (reply.type() != RedisReply::Type::Array || reply.elements().size() < 2) return;
    const auto& parts = reply.elements();
    if (parts[0].type() != RedisReply::Type::String || parts[0].str() != "message") return;  // pong, subscribe
    if (parts.size() < 3) return;
    // Tests hold messages here to show what does not depend on them.
    fault::point("near.before_invalidate");
    messages.fetch_add(1, std::memory_order_relaxed);
    const RedisReply& keys = parts[2];
    if (keys.is_nil()) {
        near.drop("the server flushed its keys (FLUSHALL / FLUSHDB)");
        return;
    }
    if (keys.type() == RedisReply::Type::Array) {
        for (const auto& k : keys.elements()) {
            if (k.type() == RedisReply::Type::String) near.invalidate(k.str());
        }
    } else if (keys.type() == RedisReply::Type::String) {
        near.invalidate(keys.str());
    }
}

bool NodeChannel::idle_readers_alive() {
    if (options.mode != TrackingMode::Default) return true;
    MutexLock lock(mutex);
    const auto dead = std::remove_if(idle.begin(), idle.end(), [](const Reader& r) { return !r.conn->looks_alive(); });
    const bool all_alive = dead == idle.end();
    idle.erase(dead, idle.end());
    return all_alive;
}

Reader NodeChannel::take_reader() {
    std::int64_t redirect = 0;
    std::uint64_t gen = 0;
    {
        const auto deadline = Clock::now() + redis.pool_wait_timeout;
        MutexLock lock(mutex);
        for (;;) {
            if (!intact) throw ConnectionError("near cache: the invalidation channel is down (" + last_failure + ")");
            while (!idle.empty()) {
                Reader r = std::move(idle.back());
                idle.pop_back();
                if (r.generation == generation) {
                    ++lent;
                    return r;
                }
            }
            if (lent < max_readers()) break;
            if (Clock::now() >= deadline) throw TimeoutError("near cache: every tracked reader is busy (pool_wait_timeout)");
            changed.wait_until(mutex, deadline);
        }
        ++lent;
        redirect = subscriber_id;
        gen = generation;
    }
    try {
        // Broadcast: the beacon announces every key; readers need no tracking of their own.
        return Reader{open("lockstep-near-reader", redirect, options.mode == TrackingMode::Default, false), gen};
    } catch (...) {
        {
            MutexLock lock(mutex);
            if (gen == generation && lent > 0) --lent;
        }
        changed.notify_all();
        throw;
    }
}

void NodeChannel::give_back(Reader reader, bool failed) {
    const bool lost = failed || reader.conn->broken();
    {
        MutexLock lock(mutex);
        if (reader.generation == generation) {
            if (lent > 0) --lent;
            if (!lost) idle.push_back(std::move(reader));
        }
    }
    changed.notify_all();
    if (lost && options.mode == TrackingMode::Default) {
        // The keys this reader tracked are forgotten with it: their changes would go unheard.
        near.drop("a tracked reader connection was lost");
    }
}

void NodeChannel::stop() {
    {
        MutexLock lock(mutex);
        stopping = true;
    }
    changed.notify_all();
    wake();
    if (thread.joinable()) thread.join();
}

// The channel over a topology: one NodeChannel per node that serves keys (the one server, the
// Sentinel master in use, every Cluster master), re-made when the topology changes.
struct RedisInvalidationChannel::Impl {
    using Clock = std::chrono::steady_clock;

    Impl(RedisOptions r, NearCache& n, RedisTrackingOptions o) : redis(std::move(r)), near(n), options(std::move(o)) {}
    ~Impl() { shutdown(); }

    const RedisOptions redis;
    NearCache& near;
    const RedisTrackingOptions options;
    std::atomic<std::uint64_t> topology_changes{0};

    Mutex topology_mutex;  // one change of the node set at a time; taken before `mutex`
    mutable Mutex mutex;
    CondVar mapped_cv;
    bool mapped GUARDED_BY(mutex) = false;  // Cluster: the first map's channels are made
    // Keyed by "host:port". Cluster: a master without an entry (just added) has no channel yet:
    // its keys are read the ordinary way.
    std::map<std::string, std::shared_ptr<NodeChannel>> nodes GUARDED_BY(mutex);
    std::uint64_t retired_connects GUARDED_BY(mutex) = 0;
    std::uint64_t retired_messages GUARDED_BY(mutex) = 0;

    // Declared last: destroyed (their threads joined, so no listener runs) before the nodes.
    std::unique_ptr<detail::RedisClusterRouter> cluster;
    std::unique_ptr<detail::RedisSentinelRouter> sentinel;

    // Connects and subscribes on every node; throws what the first failing node failed with.
    void start();
    void shutdown() EXCLUDES(mutex);
    std::shared_ptr<NodeChannel> add_node(const RedisOptions& node) EXCLUDES(mutex);
    void retire(std::vector<std::shared_ptr<NodeChannel>> gone) EXCLUDES(mutex);
    // The node that serves `key`; ConnectionError when it has no channel.
    std::shared_ptr<NodeChannel> node_for(const std::string& key) EXCLUDES(mutex);
    void cluster_map_changed(const std::vector<std::string>& masters) EXCLUDES(mutex);
    void sentinel_switched(detail::RedisSentinelRouter& router) EXCLUDES(mutex);
};

namespace {
// A Cluster master's connection options: what the cluster router connects to for "host:port".
RedisOptions node_options(const RedisOptions& base, const std::string& address) {
    RedisOptions o = base;
    o.topology = RedisTopology::Standalone;
    o.nodes.clear();
    const detail::NodeAddress node = detail::split_address(address);
    const RedisEndpoint target = mapped_address(o, node.host, node.port);
    o.host = target.host;
    o.port = target.port;
    return o;
}
}  // namespace

std::shared_ptr<NodeChannel> RedisInvalidationChannel::Impl::add_node(const RedisOptions& node) {
    auto channel = std::make_shared<NodeChannel>(node, near, options);
    channel->start();
    MutexLock lock(mutex);
    nodes[channel->address] = channel;
    return channel;
}

void RedisInvalidationChannel::Impl::retire(std::vector<std::shared_ptr<NodeChannel>> gone) {
    for (auto& node : gone) {
        node->stop();  // a read still holding it finishes on its reader
        MutexLock lock(mutex);
        retired_connects += node->subscriptions();
        retired_messages += node->messages.load(std::memory_order_relaxed);
    }
}

void RedisInvalidationChannel::Impl::start() {
    const auto deadline = Clock::now() + redis.connect_timeout + redis.socket_timeout;
    switch (redis.topology) {
        case RedisTopology::Standalone:
            add_node(redis);
            break;
        case RedisTopology::Cluster: {
            cluster = std::make_unique<detail::RedisClusterRouter>(redis);
            // Registered before the first map: that map makes the channels (and the watch thread
            // asks for the map every second from now on).
            cluster->add_map_change_listener([this](const std::vector<std::string>& masters) { cluster_map_changed(masters); });
            cluster->refresh();
            MutexLock lock(mutex);
            while (!mapped && Clock::now() < deadline) mapped_cv.wait_until(mutex, deadline);
            break;
        }
        case RedisTopology::Sentinel: {
            sentinel = std::make_unique<detail::RedisSentinelRouter>(redis);
            sentinel->add_switch_listener([this, router = sentinel.get()] { sentinel_switched(*router); });
            const RedisOptions master = sentinel->master_options();
            MutexLock serial(topology_mutex);
            bool have = false;
            {
                MutexLock lock(mutex);
                have = !nodes.empty();  // a switch made it already
            }
            if (!have) add_node(master);
            break;
        }
    }
    std::vector<std::shared_ptr<NodeChannel>> all;
    {
        MutexLock lock(mutex);
        for (const auto& [address, node] : nodes) all.push_back(node);
    }
    if (all.empty()) throw ConnectionError("near cache: no Redis node to subscribe to");
    std::string why;
    for (const auto& node : all) {
        if (!node->wait_intact(deadline, why)) {
            throw ConnectionError("near cache: cannot subscribe to " + std::string(kInvalidateChannel) + " on " + why);
        }
    }
}

void RedisInvalidationChannel::Impl::shutdown() {
    cluster.reset();
    sentinel.reset();
    std::vector<std::shared_ptr<NodeChannel>> all;
    {
        MutexLock lock(mutex);
        for (auto& [address, node] : nodes) all.push_back(std::move(node));
        nodes.clear();
    }
    for (auto& node : all) node->stop();
}

std::shared_ptr<NodeChannel> RedisInvalidationChannel::Impl::node_for(const std::string& key) {
    // Asked outside the mutex: a refresh of the map calls cluster_map_changed().
    const std::string address = cluster ? cluster->master_of(redis_cluster_slot(key)) : std::string{};
    MutexLock lock(mutex);
    if (!cluster) {
        if (nodes.empty()) throw ConnectionError("near cache: the Redis master is switching");
        return nodes.begin()->second;
    }
    auto it = nodes.find(address);
    if (it == nodes.end()) throw ConnectionError("near cache: no invalidation channel on " + address + " (yet)");
    return it->second;
}

// Any change of a slot's owner: every entry may now live on a node whose subscriber never
// tracked it (a migration, a failover, a node added), so everything is dropped, the nodes that
// serve no slot any more lose their channel and new masters get one. Reads whose ticket predates
// the drop cannot fill; reads after it route by the new map.
void RedisInvalidationChannel::Impl::cluster_map_changed(const std::vector<std::string>& masters) {
    MutexLock serial(topology_mutex);
    std::vector<std::shared_ptr<NodeChannel>> gone;
    std::vector<std::string> missing;
    bool first = false;
    {
        MutexLock lock(mutex);
        first = !mapped;
        for (auto it = nodes.begin(); it != nodes.end();) {
            if (std::find(masters.begin(), masters.end(), it->first) == masters.end()) {
                gone.push_back(std::move(it->second));
                it = nodes.erase(it);
            } else {
                ++it;
            }
        }
        for (const auto& address : masters) {
            if (!nodes.contains(address)) missing.push_back(address);
        }
    }
    if (!first) {
        topology_changes.fetch_add(1);
        near.drop("the Redis Cluster slot map changed");
    }
    std::vector<std::shared_ptr<NodeChannel>> fresh;
    for (const auto& address : missing) {
        try {
            auto node = std::make_shared<NodeChannel>(node_options(redis, address), near, options);
            node->start();
            fresh.push_back(std::move(node));
        } catch (const std::exception& e) {
            logger()->error("near cache: no invalidation channel on {}: {}", address, e.what());
        }
    }
    {
        MutexLock lock(mutex);
        for (auto& node : fresh) nodes[node->address] = std::move(node);
        mapped = true;
    }
    mapped_cv.notify_all();
    retire(std::move(gone));
}

// The master changed: entries tracked by the old one will hear nothing of writes to the new one.
// The old channel goes first (reads from now on find none and go the ordinary way), then the
// drop (reads that already took a node took their ticket before it), then the new channel.
void RedisInvalidationChannel::Impl::sentinel_switched(detail::RedisSentinelRouter& router) {
    MutexLock serial(topology_mutex);
    topology_changes.fetch_add(1);
    std::vector<std::shared_ptr<NodeChannel>> gone;
    {
        MutexLock lock(mutex);
        for (auto& [address, node] : nodes) gone.push_back(std::move(node));
        nodes.clear();
    }
    near.drop("Sentinel switched the master");
    if (const auto master = router.known_master_options()) {
        try {
            add_node(*master);
        } catch (const std::exception& e) {
            logger()->error("near cache: no invalidation channel on the new master: {}", e.what());
        }
    }
    retire(std::move(gone));
}

RedisInvalidationChannel::RedisInvalidationChannel(RedisOptions redis, NearCache& near, RedisTrackingOptions options) {
    if (options.mode == TrackingMode::Broadcast && options.prefixes.empty())
        throw ConfigError("near_cache.prefixes", "Broadcast tracking needs at least one key prefix");
    if (options.heartbeat <= std::chrono::milliseconds(0)) throw ConfigError("near_cache.heartbeat", "must be positive");
    if (options.reconnect_backoff <= std::chrono::milliseconds(0))
        throw ConfigError("near_cache.reconnect_backoff", "must be positive");
    impl_ = std::make_shared<Impl>(std::move(redis), near, std::move(options));
    try {
        impl_->start();
    } catch (...) {
        impl_->shutdown();
        throw;
    }
}

RedisInvalidationChannel::~RedisInvalidationChannel() { impl_->shutdown(); }

bool RedisInvalidationChannel::intact() const {
    MutexLock lock(impl_->mutex);
    if (impl_->nodes.empty()) return false;
    return std::all_of(impl_->nodes.begin(), impl_->nodes.end(), [](const auto& n) { return n.second->is_intact(); });
}

std::optional<std::string> RedisInvalidationChannel::tracked_get(const std::string& key) {
    const std::shared_ptr<NodeChannel> node = impl_->node_for(key);
    RedisReply reply = node->get(key);
    if (impl_->cluster && (detail::is_error_reply(reply, "MOVED ") || detail::is_error_reply(reply, "ASK "))) {
        // The map is out of date: drop (the map's next change would too) and ask for it now.
        impl_->near.drop("a tracked read was redirected (" + reply.error_message() + ")");
        try {
            impl_->cluster->refresh();
        } catch (const Error& e) {
            logger()->debug("near cache: slot map refresh failed: {}", e.what());
        }
        throw ConnectionError("near cache: the slot of a tracked read moved (" + reply.error_message() + ")");
    }
    reply.throw_if_error();
    return std::move(reply).optional_string();
}

std::int64_t RedisInvalidationChannel::subscriber_id() const {
    MutexLock lock(impl_->mutex);
    return impl_->nodes.size() == 1 ? impl_->nodes.begin()->second->id() : 0;
}

std::int64_t RedisInvalidationChannel::subscriber_id(const std::string& key) const {
    try {
        return impl_->node_for(key)->id();
    } catch (const ConnectionError&) {
        return 0;
    }
}

std::uint64_t RedisInvalidationChannel::connects() const {
    MutexLock lock(impl_->mutex);
    std::uint64_t n = impl_->retired_connects;
    for (const auto& [address, node] : impl_->nodes) n += node->subscriptions();
    return n;
}

std::uint64_t RedisInvalidationChannel::messages() const {
    MutexLock lock(impl_->mutex);
    std::uint64_t n = impl_->retired_messages;
    for (const auto& [address, node] : impl_->nodes) n += node->messages.load(std::memory_order_relaxed);
    return n;
}

std::uint64_t RedisInvalidationChannel::topology_changes() const { return impl_->topology_changes.load(); }

const RedisTrackingOptions& RedisInvalidationChannel::options() const noexcept { return impl_->options; }

}  // namespace lockstep
