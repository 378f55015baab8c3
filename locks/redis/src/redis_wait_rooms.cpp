// The wait rooms (L7, L9): one subscription per wait channel and client, shared by every thread
// of this client that waits on it, confirmed by the server before the waiter's queuing try (so a
// release published after the try reaches it). A message wakes the one waiter a mutex release
// named, or every waiter of a rw lock; anything else on the channel wakes nobody (B5). A
// reconnect of the subscriber wakes everyone (messages may have been missed).
#include <algorithm>
#include <utility>

#include "lock_client_impl.h"

namespace lockstep {

bool RedisLockClient::Impl::listening_on(const std::string& channel) {
    MutexLock lock(rooms_mutex);
    return rooms.find(channel) != rooms.end();
}

void RedisLockClient::Impl::Room::arm(Waiter& w) {
    MutexLock lock(mutex);
    w.woken = false;
}

void RedisLockClient::Impl::Room::sleep(Waiter& w, SteadyTime until) {
    MutexLock lock(mutex);
    while (!w.woken) {
        if (w.cv.wait_until(mutex, until) == std::cv_status::timeout) break;
    }
}

std::shared_ptr<RedisLockClient::Impl::Room> RedisLockClient::Impl::join_room(const std::string& channel,
                                                                              WakeRule rule, Waiter& waiter) {
    std::shared_ptr<Room> room;
    bool subscribe = false;
    bool add_listener = false;
    {
        MutexLock lock(rooms_mutex);
        if (!reconnect_listener_added) {
            reconnect_listener_added = true;
            add_listener = true;
        }
        auto& slot = rooms[channel];
        if (!slot) {
            slot = std::make_shared<Room>();
            slot->channel = channel;
            slot->rule = rule;
            subscribe = true;
        }
        room = slot;
        ++room->refs;
    }
    if (add_listener) {
        // Messages published while the subscriber was reconnecting are lost: everyone re-checks.
        std::weak_ptr<Impl> self = weak_from_this();
        reconnect_listener = redis.subscriber().add_reconnect_listener([self] {
            if (auto s = self.lock()) s->wake_everyone();
        });
    }
    if (subscribe) {
        try {
            std::weak_ptr<Room> weak_room = room;
            std::weak_ptr<Impl> self = weak_from_this();
            auto sub = redis.subscriber().subscribe(
                channel, [weak_room, self](std::string_view, std::string_view msg) {
                    auto r = weak_room.lock();
                    auto s = self.lock();
                    if (r && s) on_message(r, msg, s.get());
                });
            MutexLock lock(room->mutex);
            room->subscription = std::move(sub);
            room->ready = true;
        } catch (...) {
            {
                MutexLock lock(room->mutex);
                room->failed = std::current_exception();
                room->ready = true;
            }
            room->ready_cv.notify_all();
            {
                MutexLock lock(rooms_mutex);
                auto it = rooms.find(channel);
                if (it != rooms.end() && it->second == room) rooms.erase(it);
                --room->refs;
            }
            throw;
        }
        room->ready_cv.notify_all();
    }
    MutexLock lock(room->mutex);
    while (!room->ready) room->ready_cv.wait(room->mutex);
    if (room->failed) {
        auto failed = room->failed;
        lock.unlock();
        {
            MutexLock rl(rooms_mutex);
            --room->refs;
        }
        std::rethrow_exception(failed);
    }
    room->waiters.push_back(&waiter);
    return room;
}

void RedisLockClient::Impl::leave_room(const std::shared_ptr<Room>& room, Waiter& waiter) {
    {
        MutexLock lock(room->mutex);
        auto& w = room->waiters;
        w.erase(std::remove(w.begin(), w.end(), &waiter), w.end());
    }
    RedisSubscriber::Subscription last;
    {
        MutexLock lock(rooms_mutex);
        if (--room->refs == 0) {
            auto it = rooms.find(room->channel);
            if (it != rooms.end() && it->second == room) rooms.erase(it);
            MutexLock rl(room->mutex);
            last = std::move(room->subscription);
        }
    }
    // `last` unsubscribes here, outside every lock (the subscriber thread may be delivering).
}

void RedisLockClient::Impl::on_message(const std::shared_ptr<Room>& room, std::string_view message,
                                       Impl* impl) {
    MutexLock lock(room->mutex);
    if (room->waiters.empty()) return;
    Waiter* target = nullptr;
    if (room->rule == WakeRule::NamedWaiter) {
        // B5: a mutex release names the one waiter it chose (L9): "<this client's id>:w<n>".
        // Anything else on the channel (an outside PUBLISH, a malformed message) wakes nobody.
        const std::string mine = impl->id + ":w";
        if (message.substr(0, mine.size()) != mine) return;
        for (Waiter* w : room->waiters) {
            if (w->id == message) target = w;
        }
        // The named waiter left meanwhile: the oldest local one re-checks in its place.
        if (!target) target = room->waiters.front();
    } else if (message != "r" && message != "w" && message != "l") {
        return;  // B5: only the rw release/leave messages wake this name's waiters
    }
    if (target) {
        target->woken = true;
        target->cv.notify_one();
        impl->stats.wakeups.fetch_add(1);
        return;
    }
    for (Waiter* w : room->waiters) {
        w->woken = true;
        w->cv.notify_one();
    }
    impl->stats.wakeups.fetch_add(room->waiters.size());
}

void RedisLockClient::Impl::wake_everyone() {
    std::vector<std::shared_ptr<Room>> all;
    {
        MutexLock lock(rooms_mutex);
        for (const auto& [c, r] : rooms) all.push_back(r);
    }
    for (const auto& r : all) {
        MutexLock lock(r->mutex);
        for (Waiter* w : r->waiters) {
            w->woken = true;
            w->cv.notify_one();
        }
        stats.wakeups.fetch_add(r->waiters.size());
    }
}

// At close(), once no waiter is left: the subscriptions end here, while the RedisClient surely
// lives (they unsubscribe when `subscriptions` goes, outside every lock).
void RedisLockClient::Impl::drop_subscriptions() {
    std::vector<RedisSubscriber::Subscription> subscriptions;
    {
        MutexLock lock(rooms_mutex);
        for (auto& [c, r] : rooms) {
            MutexLock rl(r->mutex);
            subscriptions.push_back(std::move(r->subscription));
        }
        rooms.clear();
    }
}

}  // namespace lockstep
