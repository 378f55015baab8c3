// Internal: the wait rooms of one Redis lock client (L7, L9).
// A room is one subscription to one wait channel, shared by every thread of the client that
// waits on it, and confirmed by the server before a waiter's queuing try, so that a release
// published after that try reaches the waiter. A waiter joins the room, sleeps on its own
// condition variable, and is woken by the room's message handler, which applies its owner's wake
// rule (the mutex's named waiter, the read-write lock's broadcast, the fair mutex's grant); by
// wake_everyone() (a reconnect of the subscriber, which may have lost messages; the owner's
// close()); or by its own re-check time. One implementation of the subscribing, joining and
// leaving for every Redis lock side; what a message means is the side's wake rule.
//
// Thread safety: every member may be called from any thread. A room's waiter list and each
// waiter's flags are guarded by the room's mutex; the table of rooms by the WaitRooms' own. A
// message handler runs on the subscriber's thread and takes the room's mutex itself. Lock order:
// the rooms' table before a room.
#pragma once

#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lockstep/cache/redis_subscriber.h"
#include "lockstep/core/mutex.h"
#include "lockstep/core/thread_annotations.h"
#include "lockstep/locks/lock_loss.h"  // FenceToken

namespace lockstep {

struct WaitRoom;

// One thread waiting in a room. It lives on the waiting thread's stack; a room points at it
// between join() and leave() only.
struct RoomWaiter {
    std::string id;  // what a named wake-up or a grant names
    CondVar cv;
    // Guarded by the room's mutex.
    bool woken = false;    // asked to re-check (a message for it, a reconnect, a close)
    bool granted = false;  // a grant named it (the fair mutex): it holds the lock with `token`
    FenceToken token = 0;
};

struct WaitRoom {
    std::string key;  // the room's name in its WaitRooms (a channel, or a lock name)
    std::string channel;
    Mutex mutex;
    std::vector<RoomWaiter*> waiters GUARDED_BY(mutex);  // arrival order

    // Clears `w`'s wake-up before its next try: a message that arrives after the try (or during
    // it) is kept and ends the sleep at once.
    void arm(RoomWaiter& w) EXCLUDES(mutex);
    // Sleeps until `w` is woken or granted, or `until`.
    void sleep(RoomWaiter& w, std::chrono::steady_clock::time_point until) EXCLUDES(mutex);
    // The token of a grant delivered to `w` (0: none), cleared: a grant is taken once.
    FenceToken take_grant(RoomWaiter& w) EXCLUDES(mutex);
    // Wakes every waiter of the room; returns how many. REQUIRES the room's mutex.
    std::size_t wake_all_locked() REQUIRES(mutex);

private:
    friend class WaitRooms;
    CondVar ready_cv;
    bool ready GUARDED_BY(mutex) = false;  // the subscription is confirmed, or failed
    std::exception_ptr failed GUARDED_BY(mutex);
    RedisSubscriber::Subscription subscription GUARDED_BY(mutex);
    // Guarded by WaitRooms::mutex_ (another object's mutex: not annotated).
    int refs = 0;
    std::chrono::steady_clock::time_point idle_since{};
    std::chrono::milliseconds linger{0};  // set at creation (join)
};

class WaitRooms {
public:
    // Runs on the subscriber's thread for every message on the room's channel, while the room
    // lives (no lock held: it takes the room's mutex to look at the waiters).
    using OnMessage = std::function<void(WaitRoom& room, std::string_view message)>;

    // `linger`: how long a room keeps its subscription after its last waiter left (0: it ends
    // with the last leave()), unless join() gives a room its own; a name contended again soon
    // then queues its next waiter in one round trip. Lingering rooms are dropped by drop_idle().
    // `subscriber` gives the owner's RedisClient's subscriber, asked at a room's first join only
    // (it opens its connection when first asked).
    WaitRooms(std::function<RedisSubscriber&()> subscriber, std::chrono::milliseconds linger)
        : subscriber_(std::move(subscriber)), linger_(linger) {}
    ~WaitRooms() { drop_all(); }
    WaitRooms(const WaitRooms&) = delete;
    WaitRooms& operator=(const WaitRooms&) = delete;

    // Puts `waiter` in the room `key`, subscribing `channel` first if the room is new (with
    // `on_message` as its handler, and `linger`, if given, instead of the rooms' own); returns
    // once the server confirmed the subscription. Throws what the subscription threw (the waiter
    // is then in no room).
    std::shared_ptr<WaitRoom> join(const std::string& key, const std::string& channel, RoomWaiter& waiter,
                                   OnMessage on_message, std::optional<std::chrono::milliseconds> linger = {})
        EXCLUDES(mutex_);
    // Takes `waiter` out of `room`. After it returns no handler touches the waiter, and its flags
    // may be read without the room's mutex.
    void leave(const std::shared_ptr<WaitRoom>& room, RoomWaiter& waiter) EXCLUDES(mutex_);

    // The room `key`, if this client has one (lingering or not).
    std::shared_ptr<WaitRoom> find(const std::string& key) const EXCLUDES(mutex_);
    // Wakes every waiter of every room; returns how many.
    std::size_t wake_everyone() EXCLUDES(mutex_);
    // Ends the subscriptions of rooms that lingered past `linger` with no waiter.
    void drop_idle() EXCLUDES(mutex_);
    // True while a room lingers (no waiter, subscription kept): drop_idle() has work to come.
    bool lingering() const EXCLUDES(mutex_);
    // Ends every subscription (the owner is closing, its RedisClient still alive).
    void drop_all() EXCLUDES(mutex_);

private:
    const std::function<RedisSubscriber&()> subscriber_;
    const std::chrono::milliseconds linger_;
    mutable Mutex mutex_;
    std::map<std::string, std::shared_ptr<WaitRoom>> rooms_ GUARDED_BY(mutex_);
};

}  // namespace lockstep
