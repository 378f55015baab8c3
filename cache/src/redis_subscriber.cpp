// The subscriber thread owns one blocking hiredis connection. It waits in poll() on that socket
// and on an eventfd; other threads never touch the socket: they record what they want
// (channels to subscribe or drop) under the mutex and poke the eventfd. Writes go through
// redisAppendCommandArgv + flush_output, reads through redisBufferRead + redisGetReplyFromReader,
// so the thread only blocks in poll() (or briefly in a bounded connect/send).
//
// Confirmation bookkeeping: the server answers SUBSCRIBE commands in order, one
// ["subscribe", channel, n] per channel. `unconfirmed[channel]` counts SUBSCRIBEs sent on this
// connection and not yet answered; a channel is confirmed when the answer to its latest SUBSCRIBE
// arrives (count back to 0). Counting (rather than a flag) matters when a channel is dropped and
// re-added quickly: the wire then carries SUBSCRIBE, UNSUBSCRIBE, SUBSCRIBE, and the first
// answer must not confirm the second subscription, or a message published between the server
// handling UNSUBSCRIBE and the second SUBSCRIBE would be lost after subscribe() returned.
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
    explicit Impl(RedisOptions o);
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
    void send_requests(redisContext* c);
    void handle(const RedisReply& reply);
    void confirm(const std::string& channel);
    void deliver(const std::string& channel, const std::string& message);
    void notify_reconnected_if_ready();
    void wait_for_wake(std::chrono::milliseconds timeout) const;
    void drain_wake() const;

    void reset_connection_state_locked(bool connection_up) REQUIRES(mutex);
    void update_connected_locked() REQUIRES(mutex) { connected.store(up && confirmed_channels == channels.size()); }

    const RedisOptions options;
    const std::string where;
    detail::UniqueFd wake_fd;

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

RedisSubscriber::Impl::Impl(RedisOptions o)
    : options(std::move(o)), where("redis subscriber " + detail::endpoint(options.host, options.port)) {
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
    for (;;) {
        {
            MutexLock lock(mutex);
            if (stopping) return;
        }
        std::unique_ptr<RedisConnection> conn;
        try {
            conn = std::make_unique<RedisConnection>(options);
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
        try {
            serve(*conn);
        } catch (const std::exception& e) {
            {
                MutexLock lock(mutex);
                last_error = e.what();
            }
            logger()->warn("{}: connection lost ({}); reconnecting", where, e.what());
            outage_reported = true;
        }
        {
            MutexLock lock(mutex);
            reset_connection_state_locked(false);
        }
        changed.notify_all();
    }
}

void RedisSubscriber::Impl::serve(RedisConnection& conn) {
    redisContext* c = conn.raw();
    for (;;) {
        send_requests(c);
        notify_reconnected_if_ready();
        {
            MutexLock lock(mutex);
            if (stopping) return;
        }
        pollfd fds[2] = {{c->fd, POLLIN, 0}, {wake_fd.get(), POLLIN, 0}};
        if (::poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            throw ConnectionError(where + ": poll failed: " + std::generic_category().message(errno));
        }
        if ((fds[1].revents & POLLIN) != 0) drain_wake();
        if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
            if (redisBufferRead(c) != REDIS_OK) detail::throw_failure(c, where + ": reading");
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

void RedisSubscriber::Impl::send_requests(redisContext* c) {
    std::vector<std::string> subscribe{"SUBSCRIBE"};
    std::vector<std::string> unsubscribe{"UNSUBSCRIBE"};
    {
        MutexLock lock(mutex);
        for (auto& name : to_unsubscribe) unsubscribe.push_back(std::move(name));
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
    bool queued = false;
    for (const auto* args : {&unsubscribe, &subscribe}) {
        if (args->size() < 2) continue;
        detail::Argv argv(*args);
        if (redisAppendCommandArgv(c, argv.size(), argv.ptrs(), argv.lens()) != REDIS_OK) {
            detail::throw_failure(c, where + ": queueing " + argv.name());
        }
        queued = true;
    }
    if (queued && !detail::flush_output(c)) detail::throw_failure(c, where + ": sending (UN)SUBSCRIBE");
}

void RedisSubscriber::Impl::handle(const RedisReply& reply) {
    if (reply.is_error()) {
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
    const std::string& kind = e[0].str();
    if (kind == "message") {
        deliver(e[1].str(), e[2].str());
    } else if (kind == "subscribe") {
        confirm(e[1].str());
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

// ---- RedisSubscriber ----

RedisSubscriber::RedisSubscriber(RedisOptions options) : impl_(std::make_shared<Impl>(std::move(options))) {
    // The thread keeps the Impl alive while it runs (see Impl::stop for why).
    impl_->thread = std::thread([self = impl_] { self->run(); });
    impl_->thread_id = impl_->thread.get_id();
}

RedisSubscriber::~RedisSubscriber() {
    impl_->stop();
}

RedisSubscriber::Subscription RedisSubscriber::subscribe(std::string channel, Callback callback) {
    Impl& m = *impl_;
    if (!callback) throw ConfigError("callback", "must not be empty");
    if (m.on_subscriber_thread()) {
        throw Error(m.where +
                    ": subscribe() called from a subscriber callback would wait for its own thread");
    }
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
        if (done && !m.stopping) return Subscription(impl_, this, id);
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

void RedisSubscriber::unsubscribe(std::uint64_t id) {
    impl_->remove(id);
}

std::uint64_t RedisSubscriber::add_reconnect_listener(std::function<void()> listener) {
    if (!listener) throw ConfigError("listener", "must not be empty");
    Impl& m = *impl_;
    MutexLock lock(m.mutex);
    const std::uint64_t id = m.next_id++;
    m.listeners.emplace(id, std::make_shared<const std::function<void()>>(std::move(listener)));
    return id;
}

void RedisSubscriber::remove_reconnect_listener(std::uint64_t id) {
    impl_->remove_listener(id);
}

bool RedisSubscriber::connected() const {
    return impl_->connected.load();
}

}  // namespace lockstep
