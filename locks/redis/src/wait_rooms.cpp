#include "wait_rooms.h"

#include <algorithm>
#include <utility>

#include "lockstep/core/fault_point.h"

namespace lockstep {

void WaitRoom::arm(RoomWaiter& w) {
    MutexLock lock(mutex);
    w.woken = false;
}

FenceToken WaitRoom::take_grant(RoomWaiter& w) {
    MutexLock lock(mutex);
    const FenceToken granted = w.granted ? w.token : 0;
    w.granted = false;
    w.token = 0;
    return granted;
}

void WaitRoom::sleep(RoomWaiter& w, std::chrono::steady_clock::time_point until) {
    MutexLock lock(mutex);
    while (!w.woken && !w.granted) {
        if (w.cv.wait_until(mutex, until) == std::cv_status::timeout) break;
    }
}

std::size_t WaitRoom::wake_all_locked() {
    for (RoomWaiter* w : waiters) {
        w->woken = true;
        w->cv.notify_one();
    }
    return waiters.size();
}

std::shared_ptr<WaitRoom> WaitRooms::join(const std::string& key, const std::string& channel, RoomWaiter& waiter,
                                          OnMessage on_message, std::optional<std::chrono::milliseconds> linger) {
    std::shared_ptr<WaitRoom> room;
    bool subscribe = false;
    {
        MutexLock lock(mutex_);
        auto& slot = rooms_[key];
        if (!slot) {
            slot = std::make_shared<WaitRoom>();
            slot->key = key;
            slot->channel = channel;
            slot->linger = linger.value_or(linger_);
            subscribe = true;
        }
        room = slot;
        ++room->refs;
    }
    if (subscribe) {
        try {
            // The handler holds the room weakly: a message delivered while the room is being
            // dropped finds it gone and does nothing.
            std::weak_ptr<WaitRoom> weak_room = room;
            auto sub = subscriber_().subscribe(channel, [weak_room, on_message = std::move(on_message)](
                                                          std::string_view, std::string_view message) {
                if (auto r = weak_room.lock()) on_message(*r, message);
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
                MutexLock lock(mutex_);
                auto it = rooms_.find(key);
                if (it != rooms_.end() && it->second == room) rooms_.erase(it);
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
            MutexLock rooms_lock(mutex_);
            --room->refs;
        }
        std::rethrow_exception(failed);
    }
    room->waiters.push_back(&waiter);
    return room;
}

void WaitRooms::leave(const std::shared_ptr<WaitRoom>& room, RoomWaiter& waiter) {
    {
        MutexLock lock(room->mutex);
        auto& w = room->waiters;
        w.erase(std::remove(w.begin(), w.end(), &waiter), w.end());
    }
    RedisSubscriber::Subscription last;
    {
        MutexLock lock(mutex_);
        if (--room->refs > 0) return;
        if (room->linger.count() > 0) {
            room->idle_since = std::chrono::steady_clock::now();
            return;
        }
        auto it = rooms_.find(room->key);
        if (it != rooms_.end() && it->second == room) rooms_.erase(it);
        MutexLock room_lock(room->mutex);
        last = std::move(room->subscription);
    }
    // `last` unsubscribes here, outside every lock (the subscriber thread may be delivering).
}

std::shared_ptr<WaitRoom> WaitRooms::find(const std::string& key) const {
    MutexLock lock(mutex_);
    auto it = rooms_.find(key);
    return it == rooms_.end() ? nullptr : it->second;
}

std::size_t WaitRooms::wake_everyone() {
    std::vector<std::shared_ptr<WaitRoom>> all;
    {
        MutexLock lock(mutex_);
        for (const auto& [k, r] : rooms_) all.push_back(r);
    }
    std::size_t woken = 0;
    for (const auto& r : all) {
        MutexLock lock(r->mutex);
        woken += r->wake_all_locked();
    }
    return woken;
}

void WaitRooms::drop_idle() {
    // Destruction order matters (reverse of declaration): `ended` first (once a Subscription is
    // gone its handler never runs again), then `dropped`.
    std::vector<std::shared_ptr<WaitRoom>> dropped;
    std::vector<RedisSubscriber::Subscription> ended;
    {
        MutexLock lock(mutex_);
        const auto now = std::chrono::steady_clock::now();
        for (auto it = rooms_.begin(); it != rooms_.end();) {
            WaitRoom& r = *it->second;
            if (r.refs == 0 && now - r.idle_since >= r.linger) {
                {
                    MutexLock room_lock(r.mutex);
                    if (r.ready) ended.push_back(std::move(r.subscription));
                }
                dropped.push_back(std::move(it->second));
                it = rooms_.erase(it);
            } else {
                ++it;
            }
        }
    }
    // Tests: a message delivered between a room's removal and its unsubscribe finds the room
    // alive (the handler's weak pointer still locks: `dropped` holds it).
    if (!dropped.empty()) fault::point("locks.wait_rooms.dropped");
    // `ended` unsubscribes here, outside every lock (the subscriber thread may be delivering).
}

bool WaitRooms::lingering() const {
    MutexLock lock(mutex_);
    for (const auto& [k, r] : rooms_) {
        if (r->refs == 0) return true;
    }
    return false;
}

void WaitRooms::drop_all() {
    std::vector<std::shared_ptr<WaitRoom>> dropped;
    std::vector<RedisSubscriber::Subscription> ended;
    {
        MutexLock lock(mutex_);
        for (auto& [k, r] : rooms_) {
            MutexLock room_lock(r->mutex);
            ended.push_back(std::move(r->subscription));
            dropped.push_back(r);
        }
        rooms_.clear();
    }
}

}  // namespace lockstep
