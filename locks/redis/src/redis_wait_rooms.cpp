// The Redis client's wake rules over its wait rooms (wait_rooms.h; L7, L9). A message wakes the
// one waiter a mutex release named, or every waiter of a rw lock, or makes the fair mutex's
// waiter it names the holder (a grant); anything else on the channel wakes nobody (B5). A
// reconnect of the subscriber wakes everyone (messages may have been missed).
#include <charconv>
#include <utility>

#include "lock_client_impl.h"
#include "lockstep/core/fault_point.h"

namespace lockstep {

namespace {

std::optional<FenceToken> parse_token(std::string_view s) {
    FenceToken t = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), t);
    if (ec != std::errc() || p != s.data() + s.size() || t <= 0) return std::nullopt;
    return t;
}

}  // namespace

bool RedisLockClient::Impl::listening_on(const std::string& channel) { return rooms.find(channel) != nullptr; }

std::shared_ptr<WaitRoom> RedisLockClient::Impl::join_room(const std::shared_ptr<const LockSide>& side,
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
    const std::string& channel = side->wait_channel();
    // The handler keeps the side of the room's first waiter (every lock object of the name and
    // side has the same keys and channel): an orphan grant is undone with it.
    return rooms.join(
        channel, channel, waiter,
        [self, side](WaitRoom& room, std::string_view message) {
            if (auto s = self.lock()) on_message(room, side, message, s.get());
        },
        side->room_linger());
}

bool RedisLockClient::Impl::grant_locked(WaitRoom& room, std::string_view waiter, FenceToken token) {
    for (RoomWaiter* w : room.waiters) {
        if (w->id == waiter) {
            w->granted = true;
            w->token = token;
            w->cv.notify_one();
            return true;
        }
    }
    return false;
}

bool RedisLockClient::Impl::grant_in_process(const std::string& channel, std::string_view waiter, FenceToken token) {
    std::shared_ptr<WaitRoom> found = rooms.find(channel);
    if (!found) return false;
    WaitRoom& room = *found;
    MutexLock lock(room.mutex);
    return grant_locked(room, waiter, token);
}

void RedisLockClient::Impl::on_message(WaitRoom& room, const std::shared_ptr<const LockSide>& side,
                                       std::string_view message, Impl* impl) {
    const WakeRule rule = side->wake_rule();
    if (rule == WakeRule::Grant) {
        try {
            fault::point("locks.fair.grant_message");  // tests: a message lost on the way
        } catch (...) {
            return;
        }
        // "<waiter id> <token>": the waiter now holds the lock. B5: anything but a grant to one
        // of this client's waiters ("<client id>:...") wakes nobody.
        const auto space = message.find(' ');
        if (space == std::string_view::npos) return;
        const std::string_view waiter = message.substr(0, space);
        const auto token = parse_token(message.substr(space + 1));
        const std::string mine = impl->id + ":";
        if (!token || waiter.size() <= mine.size() || waiter.substr(0, mine.size()) != mine) return;
        {
            MutexLock lock(room.mutex);
            if (grant_locked(room, waiter, *token)) {
                impl->stats.wakeups.fetch_add(1);
                return;
            }
        }
        {
            MutexLock lock(impl->orphans_mutex);
            impl->orphan_grants.push_back({side, std::string(waiter), *token});
        }
        impl->watchdog.poke();
        return;
    }
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

SteadyTime RedisLockClient::Impl::rooms_pass() {
    std::vector<OrphanGrant> undo;
    {
        MutexLock lock(orphans_mutex);
        undo.swap(orphan_grants);
    }
    for (const OrphanGrant& o : undo) o.side->undo_grant(o.waiter, o.token);
    rooms.drop_idle();
    return rooms.lingering() ? SteadyClock::now() + std::chrono::seconds(1) : SteadyTime::max();
}

void RedisLockClient::Impl::wake_everyone() { stats.wakeups.fetch_add(rooms.wake_everyone()); }

// At close(), once no waiter is left: the subscriptions end here, while the RedisClient surely
// lives.
void RedisLockClient::Impl::drop_subscriptions() { rooms.drop_all(); }

}  // namespace lockstep
