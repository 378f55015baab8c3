// The subscriber thread owns one blocking hiredis connection. It waits in poll() on that socket
// and on an eventfd; other threads never touch the socket: they record what they want
// (channels to subscribe or drop) under the mutex and poke the eventfd. Writes go through
// redisAppendCommandArgv + flush_output, reads through read_input + redisGetReplyFromReader
// (hiredis_io.h: plain or TLS), so the thread only blocks in poll() (or briefly in a bounded
// connect/send). Over TLS, bytes OpenSSL already decrypted are invisible to poll(): they are read
// before polling again.
//
// Confirmation bookkeeping: the server answers SUBSCRIBE commands in order, one
// ["subscribe", channel, n] per channel. `unconfirmed[channel]` counts SUBSCRIBEs sent on this
// connection and not yet answered; a channel is confirmed when the answer to its latest SUBSCRIBE
// arrives (count back to 0). Counting (rather than a flag) matters when a channel is dropped and
// re-added quickly: the wire then carries SUBSCRIBE, UNSUBSCRIBE, SUBSCRIBE, and the first
// answer must not confirm the second subscription, or a message published between the server
// handling UNSUBSCRIBE and the second SUBSCRIBE would be lost after subscribe() returned.
//
// Sharded channels use the same machinery with SSUBSCRIBE / SUNSUBSCRIBE / smessage. One Impl is
// one node connection; RedisSubscriber (the Hub) routes each channel to the node its locator
// names and makes an Impl per node in use. A `sunsubscribe` the client did not ask for (no
// SUNSUBSCRIBE of ours is pending for that channel) means the server moved the channel's slot
// away: the connection is dropped and remade where the locator now says, which resubscribes
// everything and runs the reconnect listeners (messages may have been lost meanwhile).
#include "lockstep/cache/redis_subscriber.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <vector>

#include "hiredis_io.h"
#include "lockstep/cache/redis_connection.h"
#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"
#include "lockstep/core/mutex.h"
#include "redis_options_check.h"
#include "unique_fd.h"

namespace lockstep {

namespace {

constexpr std::chrono::milliseconds kFirstBackoff{20};
constexpr std::chrono::milliseconds kMaxBackoff{1000};

}  // namespace

struct RedisSubscriber::Impl {
    Impl(RedisOptions o, Channels k, Locator l);
    ~Impl() { stop(); }

    // Any thread.
    void remove(std::uint64_t id);
    void remove_listener(std::uint64_t id);
    void stop();
    void wake() const;
    bool on_subscriber_thread() const { return std::this_thread::get_id() == thread_id; }

    // Subscriber thread.
    void run();
    void serve(RedisConnection& conn);
    void send_requests(const detail::Transport& t);
    void handle(const RedisReply& reply);
    void confirm(const std::string& channel);
    void deliver(const std::string& channel, const std::string& message);
    void notify_reconnected_if_ready();
    void wait_for_wake(std::chrono::milliseconds timeout) const;
    void drain_wake() const;
    void relocate_now();
    std::string current_address() const EXCLUDES(mutex) {
        MutexLock lock(mutex);
        return address;
    }

    void reset_connection_state_locked(bool connection_up) REQUIRES(mutex);
    void update_connected_locked() REQUIRES(mutex) { connected.store(up && confirmed_channels == channels.size()); }

    const RedisOptions options;
    const Channels kind;
    const Locator locate;  // empty: always `options`' server
    const std::string where;
    detail::UniqueFd wake_fd;
    RedisOptions current;  // the node connected to; the subscriber thread's after start

    struct Channel {
        std::vector<std::uint64_t> ids;  // subscriptions (callbacks) on this channel
        bool sent = false;               // SUBSCRIBE written on the current connection
        bool confirmed = false;          // ...and its answer received
    };
    struct Entry {
        std::string channel;
        std::shared_ptr<const Callback> callback;
    };

    mutable Mutex mutex;  // guards everything down to `last_error`
    CondVar changed;
    std::map<std::string, Channel, std::less<>> channels GUARDED_BY(mutex);
    std::size_t confirmed_channels GUARDED_BY(mutex) = 0;
    std::unordered_map<std::uint64_t, Entry> subscriptions GUARDED_BY(mutex);
    std::map<std::uint64_t, std::shared_ptr<const std::function<void()>>> listeners GUARDED_BY(mutex);
    std::vector<std::string> to_subscribe GUARDED_BY(mutex);    // channels created since the last send
    std::vector<std::string> to_unsubscribe GUARDED_BY(mutex);  // channels whose last callback went
    std::map<std::string, int, std::less<>> unconfirmed GUARDED_BY(mutex);
    std::map<std::string, int, std::less<>> unsubscribing GUARDED_BY(mutex);  // our SUNSUBSCRIBEs unanswered
    std::string address GUARDED_BY(mutex);  // "host:port" of `current`, for the Hub's routing
    bool relocate_requested GUARDED_BY(mutex) = false;
    std::uint64_t next_id GUARDED_BY(mutex) = 1;
    bool up GUARDED_BY(mutex) = false;
    bool stopping GUARDED_BY(mutex) = false;
    bool reconnect_pending GUARDED_BY(mutex) = false;
    std::string last_error GUARDED_BY(mutex);

    std::atomic<bool> connected{false};

    // Held by the subscriber thread while callbacks and listeners run. Removing a callback from
    // another thread takes it too, so once remove() returns that callback is not running and
    // will not run again: callbacks may capture references to the waiter's stack.
    // A plain std::mutex, outside the thread-safety analysis: it guards no data (only "no callback
    // is running"), and remove() takes it conditionally, which the analysis cannot express.
    std::mutex dispatch_mutex;

    std::thread thread;
    std::thread::id thread_id;
};

RedisSubscriber::Impl::Impl(RedisOptions o, Channels k, Locator l)
    : options(std::move(o)),
      kind(k),
      locate(std::move(l)),
      where("redis subscriber " + detail::endpoint(options.host, options.port)),
      current(options),
      address(detail::endpoint(options.host, options.port)) {
    detail::check_redis_options(options);
    wake_fd = detail::UniqueFd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (wake_fd.get() < 0) {
        throw Error(where + ": eventfd failed: " + std::generic_category().message(errno));
    }
}

void RedisSubscriber::Impl::wake() const {
    const std::uint64_t one = 1;
    // Cannot block (non-blocking eventfd) and cannot meaningfully fail: the counter saturating
    // would already mean "wake up".
    [[maybe_unused]] const ssize_t n = ::write(wake_fd.get(), &one, sizeof one);
}

void RedisSubscriber::Impl::drain_wake() const {
    std::uint64_t value;
    [[maybe_unused]] const ssize_t n = ::read(wake_fd.get(), &value, sizeof value);
}

void RedisSubscriber::Impl::wait_for_wake(std::chrono::milliseconds timeout) const {
    pollfd fd{wake_fd.get(), POLLIN, 0};
    if (::poll(&fd, 1, static_cast<int>(timeout.count())) > 0) drain_wake();
}

// After a broken connection: ask the locator where this node's channels are served now (the slot
// map or the Sentinel master refreshed). A failed master's slots move together to its promoted
// replica, so one channel names the place for all of them; a channel split off by a migration is
// refused there (MOVED) and moves this connection again (documented limitation: the waiters of
// the channel left behind fall back to their re-check until it is resubscribed).
void RedisSubscriber::Impl::relocate_now() {
    if (!locate) return;
    std::string channel;
    {
        MutexLock lock(mutex);
        relocate_requested = false;
        if (channels.empty()) return;
        channel = channels.begin()->first;
    }
    try {
        RedisOptions next = locate(channel, true);
        MutexLock lock(mutex);
        address = detail::endpoint(next.host, next.port);
        current = std::move(next);
    } catch (const std::exception& e) {
        logger()->debug("{}: cannot locate '{}' ({}); retrying where it was", where, detail::printable(channel), e.what());
    }
}

void RedisSubscriber::Impl::stop() {
    {
        MutexLock lock(mutex);
        stopping = true;
        connected.store(false);
    }
    changed.notify_all();
    wake();
    if (thread.joinable()) {
        // Destroyed from one of its own callbacks: the thread cannot join itself. It holds a
        // reference to this Impl and leaves its loop as soon as the callback returns.
        if (on_subscriber_thread()) {
            thread.detach();
        } else {
            thread.join();
        }
    }
}

void RedisSubscriber::Impl::reset_connection_state_locked(bool connection_up) {
    up = connection_up;
    // A new (or lost) connection has no subscriptions: everything is sent again from scratch.
    to_subscribe.clear();
    to_unsubscribe.clear();
    unconfirmed.clear();
    unsubscribing.clear();
    confirmed_channels = 0;
    for (auto& [name, channel] : channels) {
        channel.sent = false;
        channel.confirmed = false;
        if (connection_up) to_subscribe.push_back(name);
    }
    update_connected_locked();
}

void RedisSubscriber::Impl::run() {
    auto backoff = kFirstBackoff;
    bool ever_connected = false;
    bool outage_reported = false;
    bool failed = false;  // the last connection broke (or could not be made): locate again
    for (;;) {
        {
            MutexLock lock(mutex);
            if (stopping) return;
        }
        if (failed) relocate_now();
        failed = true;
        std::unique_ptr<RedisConnection> conn;
        try {
            conn = std::make_unique<RedisConnection>(current);
        } catch (const std::exception& e) {
            {
                MutexLock lock(mutex);
                last_error = e.what();
            }
            if (!outage_reported) {
                logger()->warn("{}: cannot connect ({}); retrying with backoff", where, e.what());
                outage_reported = true;
            } else {
                logger()->debug("{}: still cannot connect ({})", where, e.what());
            }
            // A subscribe() during the outage wakes us for an immediate attempt.
            wait_for_wake(backoff);
            backoff = std::min(backoff * 2, kMaxBackoff);
            continue;
        }
        backoff = kFirstBackoff;
        outage_reported = false;
        std::size_t channel_count;
        {
            MutexLock lock(mutex);
            reset_connection_state_locked(true);
            last_error.clear();
            reconnect_pending = ever_connected;
            channel_count = channels.size();
        }
        if (ever_connected) {
            logger()->info("{}: reconnected; resubscribing {} channel(s)", where, channel_count);
        }
        ever_connected = true;
        bool served = false;  // something was confirmed on this connection before it broke
        try {
            serve(*conn);
        } catch (const std::exception& e) {
            {
                MutexLock lock(mutex);
                last_error = e.what();
                served = confirmed_channels > 0;
            }
            logger()->warn("{}: connection lost ({}); reconnecting", where, e.what());
            outage_reported = true;
        }
        {
            MutexLock lock(mutex);
            reset_connection_state_locked(false);
        }
        changed.notify_all();
        // A connection refused at once (a MOVED channel, the locator still naming the old node)
        // must not turn into a busy loop: back off as after a failed connect.
        if (!served) {
            wait_for_wake(backoff);
            backoff = std::min(backoff * 2, kMaxBackoff);
        }
    }
}

void RedisSubscriber::Impl::serve(RedisConnection& conn) {
    const detail::Transport t = conn.transport();
    redisContext* c = t.context;
    for (;;) {
        send_requests(t);
        notify_reconnected_if_ready();
        {
            MutexLock lock(mutex);
            if (stopping) return;
        }
        pollfd fds[2] = {{c->fd, POLLIN, 0}, {wake_fd.get(), POLLIN, 0}};
        const bool buffered = detail::has_buffered_input(t);
        if (::poll(fds, 2, buffered ? 0 : -1) < 0) {
            if (errno == EINTR) continue;
            throw ConnectionError(where + ": poll failed: " + std::generic_category().message(errno));
        }
        if ((fds[1].revents & POLLIN) != 0) drain_wake();
        {
            MutexLock lock(mutex);
            if (relocate_requested) throw ConnectionError(where + ": relocating (the master changed)");
        }
        if (buffered || (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
            if (!detail::read_input(t)) detail::throw_failure(c, where + ": reading");
            for (;;) {
                void* raw = nullptr;
                if (redisGetReplyFromReader(c, &raw) != REDIS_OK)
                    detail::throw_failure(c, where + ": parsing");
                if (raw == nullptr) break;
                detail::ReplyPtr reply(static_cast<redisReply*>(raw));
                handle(detail::to_reply(*reply));
            }
        }
    }
}

void RedisSubscriber::Impl::send_requests(const detail::Transport& t) {
    redisContext* c = t.context;
    const bool sharded = kind == Channels::Sharded;
    std::vector<std::string> subscribe{sharded ? "SSUBSCRIBE" : "SUBSCRIBE"};
    std::vector<std::string> unsubscribe{sharded ? "SUNSUBSCRIBE" : "UNSUBSCRIBE"};
    {
        MutexLock lock(mutex);
        for (auto& name : to_unsubscribe) {
            ++unsubscribing[name];
            unsubscribe.push_back(std::move(name));
        }
        to_unsubscribe.clear();
        for (auto& name : to_subscribe) {
            auto it = channels.find(name);
            if (it == channels.end() || it->second.sent) continue;  // dropped again, or already sent
            it->second.sent = true;
            ++unconfirmed[name];
            subscribe.push_back(std::move(name));
        }
        to_subscribe.clear();
    }
    // UNSUBSCRIBE first: a channel dropped and re-added since the last send must end up
    // subscribed. (A bare UNSUBSCRIBE would drop every channel, hence the size checks.)
    // On a cluster, SSUBSCRIBE of several channels needs them in one slot (CROSSSLOT otherwise):
    // the Hub routes per node, not per slot, so sharded channels go one command each (the
    // replies are the same: one per channel, in order).
    bool queued = false;
    auto queue = [&](const std::vector<std::string>& args) {
        detail::Argv argv(args);
        if (redisAppendCommandArgv(c, argv.size(), argv.ptrs(), argv.lens()) != REDIS_OK) {
            detail::throw_failure(c, where + ": queueing " + argv.name());
        }
        queued = true;
    };
    for (const auto* args : {&unsubscribe, &subscribe}) {
        if (args->size() < 2) continue;
        if (!sharded) {
            queue(*args);
            continue;
        }
        for (std::size_t i = 1; i < args->size(); ++i) queue({args->front(), (*args)[i]});
    }
    if (queued && !detail::flush_output(t)) detail::throw_failure(c, where + ": sending (UN)SUBSCRIBE");
}

void RedisSubscriber::Impl::handle(const RedisReply& reply) {
    if (reply.is_error()) {
        // A cluster node refusing a channel whose slot it does not serve: the locator's map was
        // out of date. Move this connection where the refreshed map says.
        if (locate && reply.error_message().rfind("MOVED", 0) == 0) {
            throw ConnectionError(where + ": channel refused (" + reply.error_message() + "); relocating");
        }
        // E.g. an ACL refusing the channel. The waiting subscribe() times out and reports it.
        logger()->error("{}: error reply: {}", where, reply.error_message());
        MutexLock lock(mutex);
        last_error = "server replied " + reply.error_message();
        return;
    }
    if (reply.type() != RedisReply::Type::Array || reply.elements().size() < 3) {
        throw ProtocolError(where + ": unexpected " + std::string(reply.type_name()) +
                            " reply in pub/sub mode");
    }
    const auto& e = reply.elements();
    const std::string& type = e[0].str();
    if (type == "message" || type == "smessage") {
        deliver(e[1].str(), e[2].str());
    } else if (type == "subscribe" || type == "ssubscribe") {
        confirm(e[1].str());
    } else if (type == "sunsubscribe") {
        // The answer to our SUNSUBSCRIBE, or the server dropping a channel whose slot moved away.
        const std::string& name = e[1].str();
        MutexLock lock(mutex);
        auto u = unsubscribing.find(name);
        if (u != unsubscribing.end()) {
            if (--u->second == 0) unsubscribing.erase(u);
        } else if (channels.find(name) != channels.end()) {
            throw ConnectionError(where + ": the server dropped channel '" + detail::printable(name) +
                                  "' (its slot moved); relocating");
        }
    }
    // "unsubscribe" needs nothing: the channel's state went when its last callback did.
}

void RedisSubscriber::Impl::confirm(const std::string& name) {
    {
        MutexLock lock(mutex);
        auto u = unconfirmed.find(name);
        if (u == unconfirmed.end() || --u->second > 0) return;
        unconfirmed.erase(u);
        auto it = channels.find(name);
        if (it != channels.end() && it->second.sent && !it->second.confirmed) {
            it->second.confirmed = true;
            ++confirmed_channels;
        }
        update_connected_locked();
    }
    changed.notify_all();
}

void RedisSubscriber::Impl::deliver(const std::string& channel, const std::string& message) {
    std::lock_guard<std::mutex> dispatch(dispatch_mutex);
    std::vector<std::uint64_t> ids;
    {
        MutexLock lock(mutex);
        auto it = channels.find(channel);
        if (it == channels.end()) return;
        ids = it->second.ids;
    }
    for (std::uint64_t id : ids) {
        std::shared_ptr<const Callback> callback;
        {
            // Looked up one by one: an earlier callback may have removed a later one.
            MutexLock lock(mutex);
            auto s = subscriptions.find(id);
            if (s == subscriptions.end()) continue;
            callback = s->second.callback;
        }
        try {
            (*callback)(channel, message);
        } catch (const std::exception& e) {
            logger()->error("{}: a callback on channel '{}' threw: {}", where, detail::printable(channel),
                            e.what());
        } catch (...) {
            logger()->error("{}: a callback on channel '{}' threw", where, detail::printable(channel));
        }
    }
}

void RedisSubscriber::Impl::notify_reconnected_if_ready() {
    std::vector<std::uint64_t> ids;
    {
        MutexLock lock(mutex);
        if (!reconnect_pending || !connected.load()) return;
        reconnect_pending = false;
        for (const auto& [id, listener] : listeners) ids.push_back(id);
    }
    std::lock_guard<std::mutex> dispatch(dispatch_mutex);
    for (std::uint64_t id : ids) {
        std::shared_ptr<const std::function<void()>> listener;
        {
            MutexLock lock(mutex);
            auto it = listeners.find(id);
            if (it == listeners.end()) continue;
            listener = it->second;
        }
        try {
            (*listener)();
        } catch (const std::exception& e) {
            logger()->error("{}: a reconnect listener threw: {}", where, e.what());
        } catch (...) {
            logger()->error("{}: a reconnect listener threw", where);
        }
    }
}

void RedisSubscriber::Impl::remove(std::uint64_t id) {
    std::unique_lock<std::mutex> dispatch(dispatch_mutex, std::defer_lock);
    // On the subscriber thread (a callback dropping a subscription) we already hold it.
    if (!on_subscriber_thread()) dispatch.lock();
    Entry removed;  // destroyed after the lock: the callback's captures may run arbitrary code
    bool need_wake = false;
    {
        MutexLock lock(mutex);
        auto s = subscriptions.find(id);
        if (s == subscriptions.end()) return;
        removed = std::move(s->second);
        subscriptions.erase(s);
        auto it = channels.find(removed.channel);
        if (it != channels.end()) {
            auto& ids = it->second.ids;
            ids.erase(std::remove(ids.begin(), ids.end(), id), ids.end());
            if (ids.empty()) {
                if (it->second.confirmed) --confirmed_channels;
                if (it->second.sent && up && !stopping) {
                    to_unsubscribe.push_back(it->first);
                    need_wake = true;
                }
                channels.erase(it);
                update_connected_locked();
            }
        }
    }
    if (need_wake) wake();
}

void RedisSubscriber::Impl::remove_listener(std::uint64_t id) {
    std::unique_lock<std::mutex> dispatch(dispatch_mutex, std::defer_lock);
    if (!on_subscriber_thread()) dispatch.lock();
    std::shared_ptr<const std::function<void()>> removed;
    MutexLock lock(mutex);
    auto it = listeners.find(id);
    if (it == listeners.end()) return;
    removed = std::move(it->second);
    listeners.erase(it);
}

// ---- Subscription ----

RedisSubscriber::Subscription::Subscription(Subscription&& other) noexcept
    : owner_(std::move(other.owner_)),
      subscriber_(std::exchange(other.subscriber_, nullptr)),
      id_(std::exchange(other.id_, 0)) {}

RedisSubscriber::Subscription& RedisSubscriber::Subscription::operator=(Subscription&& other) noexcept {
    if (this != &other) {
        reset();
        owner_ = std::move(other.owner_);
        subscriber_ = std::exchange(other.subscriber_, nullptr);
        id_ = std::exchange(other.id_, 0);
    }
    return *this;
}

RedisSubscriber::Subscription::~Subscription() {
    reset();
}

void RedisSubscriber::Subscription::reset() {
    // Through the weak owner, not `subscriber_`: the subscriber may already be gone, in which
    // case there is nothing left to unsubscribe.
    if (auto owner = owner_.lock()) {
        try {
            static_cast<Impl*>(owner.get())->remove(id_);
        } catch (const std::exception& e) {
            logger()->error("redis subscriber: unsubscribing failed: {}", e.what());
        }
    }
    owner_.reset();
    subscriber_ = nullptr;
    id_ = 0;
}

// ---- RedisSubscriber (the Hub: which node connection serves which channel) ----

struct RedisSubscriber::Hub {
    Hub(RedisOptions o, Channels k, Locator l) : options(std::move(o)), kind(k), locate(std::move(l)) {}
    ~Hub() {
        std::vector<std::shared_ptr<Impl>> all;
        {
            MutexLock lock(mutex);
            all = nodes;
        }
        for (auto& node : all) node->stop();
    }

    std::shared_ptr<Impl> start_node(RedisOptions o) REQUIRES(mutex) {
        auto node = std::make_shared<Impl>(std::move(o), kind, locate);
        {
            MutexLock nl(node->mutex);
            for (const auto& [id, listener] : listeners) node->listeners.emplace(id, listener);
        }
        // The thread keeps the Impl alive while it runs (see Impl::stop for why).
        node->thread = std::thread([self = node] { self->run(); });
        node->thread_id = node->thread.get_id();
        nodes.push_back(node);
        return node;
    }

    // The node connection for `channel`: the one the locator names (made on first use).
    std::shared_ptr<Impl> node_for(const std::string& channel) EXCLUDES(mutex) {
        if (!locate) {
            MutexLock lock(mutex);
            return nodes.front();
        }
        RedisOptions o = locate(channel, false);  // outside the lock: it may ask the cluster
        const std::string address = detail::endpoint(o.host, o.port);
        MutexLock lock(mutex);
        for (auto& node : nodes) {
            if (node->current_address() == address) return node;
        }
        return start_node(std::move(o));
    }

    bool on_a_subscriber_thread() const EXCLUDES(mutex) {
        MutexLock lock(mutex);
        return std::any_of(nodes.begin(), nodes.end(), [](const auto& n) { return n->on_subscriber_thread(); });
    }

    std::vector<std::shared_ptr<Impl>> all() const EXCLUDES(mutex) {
        MutexLock lock(mutex);
        return nodes;
    }

    const RedisOptions options;
    const Channels kind;
    const Locator locate;
    mutable Mutex mutex;
    std::vector<std::shared_ptr<Impl>> nodes GUARDED_BY(mutex);  // never erased (one per node in use)
    std::map<std::uint64_t, std::shared_ptr<const std::function<void()>>> listeners GUARDED_BY(mutex);
    std::uint64_t next_listener GUARDED_BY(mutex) = 1;
};

RedisSubscriber::RedisSubscriber(RedisOptions options, Channels channels, Locator locate)
    : hub_(std::make_shared<Hub>(options, channels, std::move(locate))) {
    if (!hub_->locate) {
        detail::check_redis_options(options);
        MutexLock lock(hub_->mutex);
        hub_->start_node(std::move(options));
    }
}

RedisSubscriber::~RedisSubscriber() {
    for (auto& node : hub_->all()) node->stop();
}

RedisSubscriber::Subscription RedisSubscriber::subscribe(std::string channel, Callback callback) {
    if (!callback) throw ConfigError("callback", "must not be empty");
    if (hub_->on_a_subscriber_thread()) {
        throw Error("redis subscriber: subscribe() called from a subscriber callback would wait for its own thread");
    }
    std::shared_ptr<Impl> node = hub_->node_for(channel);
    Impl& m = *node;
    const std::string shown = detail::printable(channel);
    std::uint64_t id;
    std::string failure;
    bool down;
    {
        MutexLock lock(m.mutex);
        if (m.stopping) throw ConnectionError(m.where + ": shutting down");
        id = m.next_id++;
        m.subscriptions.emplace(id,
                                Impl::Entry{channel, std::make_shared<const Callback>(std::move(callback))});
        auto [it, created] = m.channels.try_emplace(channel);
        it->second.ids.push_back(id);
        if (created) {
            m.to_subscribe.push_back(channel);
            m.update_connected_locked();
            m.wake();
        }
        // The iterator stays valid: the channel cannot go while our id is in it.
        const auto deadline =
            std::chrono::steady_clock::now() + m.options.connect_timeout + m.options.socket_timeout;
        bool done = m.stopping || it->second.confirmed;
        while (!done) {
            const bool timed_out = m.changed.wait_until(m.mutex, deadline) == std::cv_status::timeout;
            done = m.stopping || it->second.confirmed;
            if (timed_out) break;
        }
        if (done && !m.stopping) return Subscription(node, this, id);
        down = !m.up || m.stopping;
        if (m.stopping) {
            failure = " (shutting down)";
        } else if (!m.last_error.empty()) {
            failure = " (last error: " + m.last_error + ")";
        }
    }
    // Withdrawn, so the callback is never called: the caller got no Subscription to drop.
    m.remove(id);
    const auto limit = std::to_string((m.options.connect_timeout + m.options.socket_timeout).count());
    if (down)
        throw ConnectionError(m.where + ": cannot subscribe to '" + shown + "': not connected" + failure);
    throw TimeoutError(m.where + ": subscription to '" + shown + "' not confirmed within " + limit + "ms" +
                       failure);
}

std::uint64_t RedisSubscriber::add_reconnect_listener(std::function<void()> listener) {
    if (!listener) throw ConfigError("listener", "must not be empty");
    auto shared = std::make_shared<const std::function<void()>>(std::move(listener));
    MutexLock lock(hub_->mutex);
    const std::uint64_t id = hub_->next_listener++;
    hub_->listeners.emplace(id, shared);
    for (auto& node : hub_->nodes) {
        MutexLock nl(node->mutex);
        node->listeners.emplace(id, shared);
    }
    return id;
}

void RedisSubscriber::remove_reconnect_listener(std::uint64_t id) {
    std::shared_ptr<const std::function<void()>> removed;  // destroyed after the locks
    {
        MutexLock lock(hub_->mutex);
        auto it = hub_->listeners.find(id);
        if (it == hub_->listeners.end()) return;
        removed = std::move(it->second);
        hub_->listeners.erase(it);
    }
    // Per node, so that once this returns no node is running the listener.
    for (auto& node : hub_->all()) node->remove_listener(id);
}

bool RedisSubscriber::connected() const {
    const auto nodes = hub_->all();
    return std::all_of(nodes.begin(), nodes.end(), [](const auto& n) { return n->connected.load(); });
}

void RedisSubscriber::relocate() {
    for (auto& node : hub_->all()) {
        {
            MutexLock lock(node->mutex);
            node->relocate_requested = true;
        }
        node->wake();
    }
}

std::size_t RedisSubscriber::node_count() const {
    return hub_->all().size();
}

}  // namespace lockstep
