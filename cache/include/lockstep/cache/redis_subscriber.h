// One dedicated pub/sub connection that multiplexes many channels to callbacks, on its own
// thread. Locks use it so that all waiters of one process share one connection (L7).
//
// `subscribe` returns only after the server confirmed the subscription: a message published
// after it returns is delivered. After the connection breaks, the subscriber reconnects with
// backoff, resubscribes every channel, and then calls the reconnect listeners, because
// messages published during the outage are lost and waiters must re-check what they wait for.
//
// Callbacks run on the subscriber thread: they must be quick and must not call subscribe on
// this subscriber (it throws: it would wait for its own thread). Once a Subscription is reset or
// destroyed, its callback is not running and will not run again, so a callback may capture
// references to the waiter's stack; for the same reason, do not drop a Subscription while holding
// a mutex that its callback takes. Thread safety: all public members may be called from any
// thread.
//
// Sharded channels (Channels::Sharded, SSUBSCRIBE; the lock scripts SPUBLISH): a message stays on
// the shard that owns the channel's slot instead of crossing the whole cluster bus. With a
// Locator (RedisClient on a cluster or behind Sentinel), the subscriber keeps one connection per
// node in use, each on its own thread: a channel is subscribed on the node the locator names,
// and a node connection that breaks, or whose server moves a channel away (an unsolicited
// `sunsubscribe` after a slot migration, a MOVED refusal), reconnects where the locator now says
// (asked with refresh = true: the slot map or the master is looked up again). SPUBLISH is not
// replicated outside cluster mode, so after a Sentinel switch `relocate()` moves every
// connection to the new master. Either way the reconnect listeners run afterwards, as after any
// reconnect. Sentinel's own `+switch-master` channel is a classic one (Channels::Classic).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "lockstep/core/redis_options.h"

namespace lockstep {

class RedisSubscriber {
public:
    using Callback = std::function<void(std::string_view channel, std::string_view message)>;

    // RAII: unsubscribes this callback when destroyed (the channel itself is unsubscribed when
    // its last callback goes). Move-only.
    class Subscription {
    public:
        Subscription() = default;
        Subscription(Subscription&& other) noexcept;
        Subscription& operator=(Subscription&& other) noexcept;
        ~Subscription();
        void reset();

    private:
        friend class RedisSubscriber;
        Subscription(std::weak_ptr<void> owner, RedisSubscriber* subscriber, std::uint64_t id)
            : owner_(std::move(owner)), subscriber_(subscriber), id_(id) {}
        std::weak_ptr<void> owner_;
        RedisSubscriber* subscriber_ = nullptr;
        std::uint64_t id_ = 0;
    };

    enum class Channels { Classic, Sharded };
    // The options of the node serving `channel` now; `refresh` after a connection to the node it
    // named broke or refused the channel. Called on the caller's thread (first subscribe of a
    // channel) and on subscriber threads (reconnects); it may throw (the attempt is retried).
    using Locator = std::function<RedisOptions(std::string_view channel, bool refresh)>;

    // Without a locator: one connection to `options`' server, made now. With one: connections
    // are made per node on first use (`options` only names the first for logging).
    explicit RedisSubscriber(RedisOptions options, Channels channels = Channels::Classic, Locator locate = {});
    ~RedisSubscriber();
    RedisSubscriber(const RedisSubscriber&) = delete;
    RedisSubscriber& operator=(const RedisSubscriber&) = delete;

    // Subscribes and waits for the server's confirmation, up to connect_timeout + socket_timeout
    // (room for one reconnect attempt). On failure throws ConnectionError (not connected) or
    // TimeoutError (connected, not confirmed) and withdraws the subscription: the callback is
    // never called, as the caller holds no Subscription to cancel it with.
    [[nodiscard]] Subscription subscribe(std::string channel, Callback callback);

    // Called (on the subscriber thread) after each successful reconnect and resubscribe.
    // Returns an id for remove_reconnect_listener.
    std::uint64_t add_reconnect_listener(std::function<void()> listener);
    void remove_reconnect_listener(std::uint64_t id);

    // True while every node connection is up and every channel is subscribed.
    bool connected() const;

    // Drops every node connection; each reconnects where its locator says (a Sentinel switch:
    // SPUBLISH is not replicated, so a subscriber left on the old master would hear nothing).
    // Returns at once; the reconnect listeners run once each node has resubscribed.
    void relocate();

    // Node connections made so far (tests: one per node in use).
    std::size_t node_count() const;

private:
    struct Impl;
    struct Hub;
    std::shared_ptr<Hub> hub_;
};

}  // namespace lockstep
