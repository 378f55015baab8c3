// The in-memory Cache fake. Expired entries are invisible at once and purged lazily (on access,
// and in a sweep every few hundred writes) so a long test does not grow without bound.
#include <map>

#include "lockstep/cache/cache.h"
#include "lockstep/core/error.h"
#include "lockstep/core/mutex.h"

namespace lockstep {

namespace {

class InMemoryCache final : public Cache {
public:
    explicit InMemoryCache(std::function<std::chrono::steady_clock::time_point()> now)
        : now_(std::move(now)) {}

    std::optional<std::string> get(std::string_view key) override {
        MutexLock lock(mutex_);
        auto it = entries_.find(key);
        if (it == entries_.end()) return std::nullopt;
        if (expired(it->second)) {
            entries_.erase(it);
            return std::nullopt;
        }
        return it->second.value;
    }

    void set(std::string_view key, std::string_view value, std::chrono::milliseconds ttl) override {
        if (ttl.count() <= 0)
            throw ConfigError("ttl", "must be positive, got " + std::to_string(ttl.count()) + "ms");
        MutexLock lock(mutex_);
        const auto expires = now_() + ttl;
        auto it = entries_.find(key);
        if (it == entries_.end()) {
            entries_.emplace(std::string(key), Entry{std::string(value), expires});
        } else {
            it->second = Entry{std::string(value), expires};
        }
        if (++writes_since_sweep_ >= kSweepEvery) sweep();
    }

    bool remove(std::string_view key) override {
        MutexLock lock(mutex_);
        return erase_live(key);
    }

    std::size_t remove_many(const std::vector<std::string>& keys) override {
        MutexLock lock(mutex_);
        std::size_t existed = 0;
        for (const auto& key : keys) existed += erase_live(key) ? 1 : 0;
        return existed;
    }

private:
    struct Entry {
        std::string value;
        std::chrono::steady_clock::time_point expires;
    };
    static constexpr int kSweepEvery = 512;

    bool expired(const Entry& e) const { return now_() >= e.expires; }

    // True if the key existed and had not expired (as Redis's DEL counts).
    bool erase_live(std::string_view key) REQUIRES(mutex_) {
        auto it = entries_.find(key);
        if (it == entries_.end()) return false;
        const bool live = !expired(it->second);
        entries_.erase(it);
        return live;
    }

    void sweep() REQUIRES(mutex_) {
        writes_since_sweep_ = 0;
        for (auto it = entries_.begin(); it != entries_.end();) {
            it = expired(it->second) ? entries_.erase(it) : std::next(it);
        }
    }

    const std::function<std::chrono::steady_clock::time_point()> now_;
    Mutex mutex_;
    std::map<std::string, Entry, std::less<>> entries_ GUARDED_BY(mutex_);
    int writes_since_sweep_ GUARDED_BY(mutex_) = 0;
};

}  // namespace

std::unique_ptr<Cache> make_in_memory_cache() {
    return make_in_memory_cache([] { return std::chrono::steady_clock::now(); });
}

std::unique_ptr<Cache> make_in_memory_cache(std::function<std::chrono::steady_clock::time_point()> now) {
    if (!now) throw ConfigError("now", "the clock function must not be empty");
    return std::make_unique<InMemoryCache>(std::move(now));
}

}  // namespace lockstep
