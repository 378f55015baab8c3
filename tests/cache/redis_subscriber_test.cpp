// The shared subscriber connection: routing, reference-counted channels, the "confirmed before
// subscribe returns" guarantee, binary safety and bounded failure.
#include "lockstep/cache/redis_subscriber.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <string>

#include "lockstep/core/error.h"
#include "redis_fixture.h"

namespace lockstep::test {
namespace {

class RedisSubscriberTest : public RedisTest {
protected:
    std::string channel(const std::string& name) const { return prefix_ + "ch:" + name; }
    long long server_subscribers(const std::string& ch) {
        // On the channel's shard (a cluster counts sharded subscribers per node).
        return client_->connection_for_key(ch)->command({"PUBSUB", "SHARDNUMSUB", ch}).elements().at(1).integer();
    }
};

TEST_F(RedisSubscriberTest, DeliversEachChannelToItsOwnCallback) {
    Inbox a, b;
    auto sub_a = client_->subscriber().subscribe(channel("a"), a.callback());
    auto sub_b = client_->subscriber().subscribe(channel("b"), b.callback());
    EXPECT_EQ(client_->publish(channel("a"), "for-a"), 1);
    EXPECT_EQ(client_->publish(channel("b"), "for-b"), 1);
    // One connection delivers in publish order, so once b has its message, a's was fully
    // dispatched: any misrouting would be visible now.
    ASSERT_TRUE(a.wait_for(1));
    ASSERT_TRUE(b.wait_for(1));
    EXPECT_EQ(a.messages(), (std::vector<std::pair<std::string, std::string>>{{channel("a"), "for-a"}}));
    EXPECT_EQ(b.messages(), (std::vector<std::pair<std::string, std::string>>{{channel("b"), "for-b"}}));
    EXPECT_TRUE(client_->subscriber().connected());
}

TEST_F(RedisSubscriberTest, MessagePublishedRightAfterSubscribeReturnsIsDelivered) {
    // No waiting in between: subscribe() itself must have waited for the server.
    for (int i = 0; i < 50; ++i) {
        Inbox inbox;
        auto sub = client_->subscriber().subscribe(channel("fresh" + std::to_string(i)), inbox.callback());
        ASSERT_EQ(client_->publish(channel("fresh" + std::to_string(i)), "m"), 1) << "round " << i;
        ASSERT_TRUE(inbox.wait_for(1)) << "round " << i;
    }
}

TEST_F(RedisSubscriberTest, SeveralCallbacksShareOneServerSubscription) {
    Inbox first, second, sentinel;
    auto sub1 = client_->subscriber().subscribe(channel("c"), first.callback());
    auto sub2 = client_->subscriber().subscribe(channel("c"), second.callback());
    auto sub_sentinel = client_->subscriber().subscribe(channel("sentinel"), sentinel.callback());
    EXPECT_EQ(server_subscribers(channel("c")), 1);  // one connection, subscribed once
    EXPECT_EQ(client_->publish(channel("c"), "both"), 1);
    ASSERT_TRUE(first.wait_for(1));
    ASSERT_TRUE(second.wait_for(1));

    sub1.reset();  // the channel stays subscribed for the second callback
    EXPECT_EQ(server_subscribers(channel("c")), 1);
    EXPECT_EQ(client_->publish(channel("c"), "second-only"), 1);
    client_->publish(channel("sentinel"), "done");
    ASSERT_TRUE(second.wait_for(2));
    ASSERT_TRUE(sentinel.wait_for(1));  // after this, "second-only" has been fully dispatched
    EXPECT_EQ(first.payloads(), std::vector<std::string>{"both"});
    EXPECT_EQ(second.payloads(), (std::vector<std::string>{"both", "second-only"}));

    sub2.reset();  // last callback: the server subscription goes too
    EXPECT_TRUE(eventually([&] { return server_subscribers(channel("c")) == 0; }));
}

TEST_F(RedisSubscriberTest, ChannelDroppedAndReaddedAtOnceStaysSubscribed) {
    for (int i = 0; i < 20; ++i) {
        Inbox inbox;
        {
            auto gone = client_->subscriber().subscribe(channel("flap"), [](auto, auto) {});
        }
        auto sub = client_->subscriber().subscribe(channel("flap"), inbox.callback());
        // UNSUBSCRIBE and SUBSCRIBE may both be on the wire; subscribe() must have waited for
        // the second confirmation, so the server counts us now.
        ASSERT_EQ(client_->publish(channel("flap"), "m"), 1) << "round " << i;
        ASSERT_TRUE(inbox.wait_for(1));
    }
}

TEST_F(RedisSubscriberTest, ManyThreadsSubscribingAndDroppingSharedChannelsEachGetTheirMessages) {
    // Threads share three channels, so channels are created, shared, dropped and re-added
    // concurrently; every subscriber must still receive what is published after it subscribed.
    std::vector<std::thread> threads;
    std::atomic<int> misses{0};
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < 50; ++i) {
                Inbox inbox;
                const std::string ch = channel("shared" + std::to_string((t + i) % 3));
                auto sub = client_->subscriber().subscribe(ch, inbox.callback());
                const std::string mine = std::to_string(t) + ":" + std::to_string(i);
                client_->publish(ch, mine);
                // Others publish on the same channel: wait for our own message specifically.
                const bool got = [&] {
                    for (std::size_t n = 1;; ++n) {
                        if (!inbox.wait_for(n)) return false;
                        if (inbox.payloads()[n - 1] == mine) return true;
                    }
                }();
                if (!got) misses.fetch_add(1);
            }
        });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(misses.load(), 0);
}

TEST_F(RedisSubscriberTest, CallbackIsNotCalledAfterItsSubscriptionIsReset) {
    std::atomic<int> calls{0};
    Inbox sentinel;
    auto sub = client_->subscriber().subscribe(channel("x"), [&](auto, auto) { calls.fetch_add(1); });
    auto sub_sentinel = client_->subscriber().subscribe(channel("sentinel"), sentinel.callback());
    sub.reset();
    client_->publish(channel("x"), "late");
    client_->publish(channel("sentinel"), "done");
    ASSERT_TRUE(sentinel.wait_for(1));
    EXPECT_EQ(calls.load(), 0);
}

TEST_F(RedisSubscriberTest, ResetWaitsForARunningCallbackToFinish) {
    std::promise<void> started;
    std::promise<void> release;
    auto release_future = release.get_future().share();
    std::atomic<bool> finished{false};
    auto sub = client_->subscriber().subscribe(channel("slow"), [&](auto, auto) {
        started.set_value();
        release_future.wait_for(5s);
        finished = true;
    });
    client_->publish(channel("slow"), "m");
    started.get_future().wait();
    auto resetter = std::async(std::launch::async, [&] {
        sub.reset();
        return finished.load();  // a callback that may still run would be a use-after-return
    });
    release.set_value();
    EXPECT_TRUE(resetter.get());
}

TEST_F(RedisSubscriberTest, ChannelsAndMessagesWithNulBytesRoundTrip) {
    Inbox inbox;
    const std::string ch = channel(std::string("n\0l", 3));
    const std::string message("\0a\0", 3);
    auto sub = client_->subscriber().subscribe(ch, inbox.callback());
    EXPECT_EQ(client_->publish(channel("n"), "wrong"), 0);  // not cut at the NUL
    EXPECT_EQ(client_->publish(ch, message), 1);
    ASSERT_TRUE(inbox.wait_for(1));
    EXPECT_EQ(inbox.messages()[0].first, ch);
    EXPECT_EQ(inbox.messages()[0].second, message);
}

TEST_F(RedisSubscriberTest, SubscribeFromACallbackThrowsInsteadOfDeadlocking) {
    std::promise<std::string> outcome;
    RedisSubscriber& subscriber = client_->subscriber();
    auto sub = subscriber.subscribe(channel("re"), [&](auto, auto) {
        try {
            auto inner = subscriber.subscribe(channel("inner"), [](auto, auto) {});
            outcome.set_value("returned");
        } catch (const Error& e) {
            outcome.set_value(std::string("threw: ") + e.what());
        }
    });
    client_->publish(channel("re"), "go");
    auto f = outcome.get_future();
    ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
    EXPECT_EQ(f.get().rfind("threw", 0), 0u);
}

TEST_F(RedisSubscriberTest, ThrowingCallbackDoesNotStopDelivery) {
    Inbox inbox;
    auto bad =
        client_->subscriber().subscribe(channel("t"), [](auto, auto) { throw std::runtime_error("oops"); });
    auto good = client_->subscriber().subscribe(channel("t"), inbox.callback());
    client_->publish(channel("t"), "1");
    client_->publish(channel("t"), "2");
    ASSERT_TRUE(inbox.wait_for(2));
}

TEST_F(RedisSubscriberTest, UnreachableServerFailsSubscribeWithinItsDeadline) {
    RedisOptions o;
    o.port = refused_port();
    o.connect_timeout = 200ms;
    o.socket_timeout = 200ms;
    Stopwatch watch;
    {
        RedisSubscriber subscriber(o);
        std::atomic<int> calls{0};
        EXPECT_THROW(auto s = subscriber.subscribe("ch", [&](auto, auto) { calls++; }), ConnectionError);
        EXPECT_LT(watch.elapsed(), 400ms + 2s);
        EXPECT_FALSE(subscriber.connected());
    }  // and the destructor does not hang on the reconnect loop
    EXPECT_LT(watch.elapsed(), 3s);
}

TEST_F(RedisSubscriberTest, SubscriptionOutlivingItsSubscriberIsHarmless) {
    RedisSubscriber::Subscription sub;
    {
        RedisSubscriber subscriber(options_);
        sub = subscriber.subscribe(channel("o"), [](auto, auto) {});
    }
    sub.reset();  // no-op: nothing left to unsubscribe
    SUCCEED();
}

}  // namespace
}  // namespace lockstep::test
