// The Redis client's wake rules over its wait rooms (wait_rooms.h; L7, L9). A message wakes the
// one waiter a mutex release named, or every waiter of a rw lock; anything else on the channel
// wakes nobody (B5). A reconnect of the subscriber wakes everyone (messages may have been
// missed).
#include <utility>

#include "lock_client_impl.h"

namespace lockstep {

bool RedisLockClient::Impl::listening_on(const std::string& channel) { return rooms.find(channel) != nullptr; }

std::shared_ptr<WaitRoom> RedisLockClient::Impl::join_room(const std::string& channel, WakeRule rule,
                                                           RoomWaiter& waiter) {
    bool add_listener = false;
    {
        MutexLock lock(listener_mutex);
        if (!reconnect_listener_added) {
            reconnect_listener_added = true;
            add_listener = true;
        }
    }
    if (add_listener) {
        // Messages published while the subscriber was reconnecting are lost: everyone re-checks.
        std::weak_ptr<Impl> self = weak_from_this();
        reconnect_listener = redis.subscriber().add_reconnect_listener([self] {
            if (auto s = self.lock()) s->wake_everyone();
        });
    }
    std::weak_ptr<Impl> self = weak_from_this();
    return rooms.join(channel, channel, waiter, [self, rule](WaitRoom& room, std::string_view message) {
        if (auto s = self.lock()) on_message(room, rule, message, s.get());
    });
}

void RedisLockClient::Impl::on_message(WaitRoom& room, WakeRule rule, std::string_view message, Impl* impl) {
    MutexLock lock(room.mutex);
    if (room.waiters.empty()) return;
    RoomWaiter* target = nullptr;
    if (rule == WakeRule::NamedWaiter) {
        // B5: a mutex release names the one waiter it chose (L9): "<this client's id>:w<n>".
        // Anything else on the channel (an outside PUBLISH, a malformed message) wakes nobody.
        const std::string mine = impl->id + ":w";
        if (message.substr(0, mine.size()) != mine) return;
        for (RoomWaiter* w : room.waiters) {
            if (w->id == message) target = w;
        }
        // The named waiter left meanwhile: the oldest local one re-checks in its place.
        if (!target) target = room.waiters.front();
    } else if (message != "r" && message != "w" && message != "l") {
        return;  // B5: only the rw release/leave messages wake this name's waiters
    }
    if (target) {
        target->woken = true;
        target->cv.notify_one();
        impl->stats.wakeups.fetch_add(1);
        return;
    }
    impl->stats.wakeups.fetch_add(room.wake_all_locked());
}

void RedisLockClient::Impl::wake_everyone() { stats.wakeups.fetch_add(rooms.wake_everyone()); }

// At close(), once no waiter is left: the subscriptions end here, while the RedisClient surely
// lives.
void RedisLockClient::Impl::drop_subscriptions() { rooms.drop_all(); }

}  // namespace lockstep
