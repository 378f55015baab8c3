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

    explicit RedisSubscriber(RedisOptions options);
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

    // True while the connection is up and every channel is subscribed.
    bool connected() const;

private:
    struct Impl;
    void unsubscribe(std::uint64_t id);
    std::shared_ptr<Impl> impl_;
};

}  // namespace lockstep
