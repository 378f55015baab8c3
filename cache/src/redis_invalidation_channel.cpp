// The subscriber thread owns one blocking connection in subscribe mode and waits in poll() on it
// and on a wake-up eventfd, never longer than a heartbeat. Each generation is one subscription:
// connect, CLIENT ID, SUBSCRIBE, (Broadcast) arm the beacon, then publish the new id and
// generation and drop the near cache (reads that began while the channel was down may have used
// a reader that redirects to the dead id). Readers remember the generation they were armed in;
// one from an older generation is closed instead of lent.
#include "lockstep/cache/redis_invalidation_channel.h"

#include <poll.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "hiredis_io.h"
#include "lockstep/cache/redis_connection.h"
#include "lockstep/core/error.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/core/logging.h"
#include "lockstep/core/mutex.h"
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
}  // namespace

struct RedisInvalidationChannel::Impl {
    using Clock = std::chrono::steady_clock;

    Impl(RedisOptions r, NearCache& n, RedisTrackingOptions o) : redis(std::move(r)), near(n), options(std::move(o)) {}

    const RedisOptions redis;
    NearCache& near;
    const RedisTrackingOptions options;
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
};

std::unique_ptr<RedisConnection> RedisInvalidationChannel::Impl::open(std::string_view name, std::int64_t redirect,
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

void RedisInvalidationChannel::Impl::channel_lost(const std::string& why) {
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
    if (was_intact) logger()->warn("near cache: invalidation channel lost ({}); dropped, reconnecting", why);
}

void RedisInvalidationChannel::Impl::run() {
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

void RedisInvalidationChannel::Impl::serve(RedisConnection& conn, RedisConnection* beacon) {
    const detail::Transport t = conn.transport();
    redisContext* c = t.context;
    auto heard = Clock::now();
    auto pinged = heard;
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
        if (now - heard > kSilentHeartbeats * options.heartbeat) throw ConnectionError("subscriber silent for 3 heartbeats");
        if (now - pinged >= options.heartbeat) {
            pinged = now;
            if (redisAppendCommand(c, "PING") != REDIS_OK || !detail::flush_output(t))
                detail::throw_failure(c, "near cache subscriber: PING");
            if (beacon != nullptr && !beacon->looks_alive()) throw ConnectionError("the tracking beacon was closed");
            if (!idle_readers_alive()) near.drop("an idle tracked reader was closed by the server");
        }
    }
}

void RedisInvalidationChannel::Impl::handle(const RedisReply& reply, Clock::time_point& heard) const {
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

bool RedisInvalidationChannel::Impl::idle_readers_alive() {
    if (options.mode != TrackingMode::Default) return true;
    MutexLock lock(mutex);
    const auto dead = std::remove_if(idle.begin(), idle.end(), [](const Reader& r) { return !r.conn->looks_alive(); });
    const bool all_alive = dead == idle.end();
    idle.erase(dead, idle.end());
    return all_alive;
}

Reader RedisInvalidationChannel::Impl::take_reader() {
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

void RedisInvalidationChannel::Impl::give_back(Reader reader, bool failed) {
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

RedisInvalidationChannel::RedisInvalidationChannel(RedisOptions redis, NearCache& near, RedisTrackingOptions options) {
    if (redis.topology != RedisTopology::Standalone)
        throw ConfigError("near_cache", "needs a standalone Redis (tracking per cluster node or across a Sentinel "
                                        "switch is not implemented)");
    if (options.mode == TrackingMode::Broadcast && options.prefixes.empty())
        throw ConfigError("near_cache.prefixes", "Broadcast tracking needs at least one key prefix");
    if (options.heartbeat <= std::chrono::milliseconds(0)) throw ConfigError("near_cache.heartbeat", "must be positive");
    if (options.reconnect_backoff <= std::chrono::milliseconds(0))
        throw ConfigError("near_cache.reconnect_backoff", "must be positive");
    impl_ = std::make_shared<Impl>(std::move(redis), near, std::move(options));
    if (impl_->wake_fd.get() < 0) throw ConnectionError("near cache: eventfd failed");
    impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
    // The first subscription, or its failure, before returning.
    const auto deadline = Impl::Clock::now() + impl_->redis.connect_timeout + impl_->redis.socket_timeout;
    std::string why;
    {
        Impl& impl = *impl_;
        MutexLock lock(impl.mutex);
        while (!impl.intact && Impl::Clock::now() < deadline) impl.changed.wait_until(impl.mutex, deadline);
        if (impl.intact) return;
        why = impl.last_failure.empty() ? "not subscribed in time" : impl.last_failure;
    }
    impl_->stop();
    throw ConnectionError("near cache: cannot subscribe to " + std::string(kInvalidateChannel) + ": " + why);
}

void RedisInvalidationChannel::Impl::stop() {
    {
        MutexLock lock(mutex);
        stopping = true;
    }
    changed.notify_all();
    wake();
    if (thread.joinable()) thread.join();
}

RedisInvalidationChannel::~RedisInvalidationChannel() { impl_->stop(); }

bool RedisInvalidationChannel::intact() const {
    MutexLock lock(impl_->mutex);
    return impl_->intact;
}

std::optional<std::string> RedisInvalidationChannel::tracked_get(const std::string& key) {
    Reader reader = impl_->take_reader();
    RedisReply reply;
    try {
        reply = reader.conn->command({"GET", key});
    } catch (const Error&) {
        impl_->give_back(std::move(reader), true);
        throw;
    }
    impl_->give_back(std::move(reader), false);
    reply.throw_if_error();
    return std::move(reply).optional_string();
}

std::int64_t RedisInvalidationChannel::subscriber_id() const {
    MutexLock lock(impl_->mutex);
    return impl_->subscriber_id;
}

std::uint64_t RedisInvalidationChannel::connects() const {
    MutexLock lock(impl_->mutex);
    return impl_->connects;
}

std::uint64_t RedisInvalidationChannel::messages() const { return impl_->messages.load(std::memory_order_relaxed); }

const RedisTrackingOptions& RedisInvalidationChannel::options() const noexcept { return impl_->options; }

}  // namespace lockstep
