// EntryStore over any Cache: the conditional operations are emulated under one mutex, so they
// are atomic with respect to each other as long as every caller goes through this store (one
// process). Good for unit tests with the in-memory Cache; use make_redis_entry_store otherwise.
#include "lockstep/cache/cache.h"
#include "lockstep/core/mutex.h"
#include "lockstep/strategies/cache_entry.h"
#include "lockstep/strategies/entry_store.h"

namespace lockstep {

namespace {

bool is_canonical_value(const std::optional<CacheEntry>& e) { return e && e->kind == CacheEntry::Kind::Value; }

class CacheEntryStore final : public EntryStore {
public:
    explicit CacheEntryStore(Cache& cache) : cache_(cache) {}

    std::optional<std::string> get(const std::string& key) override { return cache_.get(key); }

    std::vector<std::optional<std::string>> get_many(const std::vector<std::string>& keys) override {
        std::vector<std::optional<std::string>> out;
        for (const auto& k : keys) out.push_back(cache_.get(k));
        return out;
    }

    Claim claim(const std::string& key, const std::string& marker, std::chrono::milliseconds ttl) override {
        MutexLock lock(mutex_);
        auto cur = cache_.get(key);
        if (!cur) {
            cache_.set(key, marker, ttl);
            return {Claim::Result::Claimed, {}};
        }
        if (cur->rfind("L:", 0) == 0) return {Claim::Result::Busy, {}};
        return {Claim::Result::Present, *cur};
    }

    std::vector<Claim> claim_many(const std::vector<std::string>& keys, const std::vector<std::string>& markers,
                                  std::chrono::milliseconds ttl) override {
        std::vector<Claim> out;
        for (std::size_t i = 0; i < keys.size(); ++i) out.push_back(claim(keys[i], markers[i], ttl));
        return out;
    }

    FillOutcome fill(const Fill& f) override {
        MutexLock lock(mutex_);
        switch (f.mode) {
            case FillMode::Always:
                break;
            case FillMode::IfMarker:
                if (cache_.get(f.key) != f.marker) return FillOutcome::Refused;
                break;
            case FillMode::IfNewer: {
                // The same rules as the fill_if_newer script (entry_scripts.cpp).
                auto cur = cache_.get(f.key);
                if (!cur) return FillOutcome::Cleared;
                auto decoded = CacheEntry::decode(*cur);
                if (!is_canonical_value(decoded) || !f.version) {
                    cache_.remove(f.key);
                    return FillOutcome::Cleared;
                }
                if (decoded->version == *f.version) return FillOutcome::Unchanged;
                if (decoded->version > *f.version) {
                    cache_.remove(f.key);
                    return FillOutcome::Refused;
                }
                break;
            }
        }
        cache_.set(f.key, f.entry, f.ttl);
        return FillOutcome::Stored;
    }

    std::vector<FillOutcome> fill_many(const std::vector<Fill>& fills) override {
        std::vector<FillOutcome> out;
        for (const auto& f : fills) out.push_back(fill(f));
        return out;
    }

    bool remove_if_equals(const std::string& key, const std::string& expected) override {
        MutexLock lock(mutex_);
        if (cache_.get(key) != expected) return false;
        return cache_.remove(key);
    }

    void remove(const std::vector<std::string>& keys) override {
        // Under the mutex too: a delete must not fall between a conditional fill's check and
        // its set (that is exactly the race Lease closes).
        MutexLock lock(mutex_);
        cache_.remove_many(keys);
    }

private:
    // Not GUARDED_BY: get() and get_many() read without it (single reads need no atomicity); the
    // mutex orders the read-check-write sequences among themselves.
    Cache& cache_;
    Mutex mutex_;
};

}  // namespace

std::shared_ptr<EntryStore> make_cache_entry_store(Cache& cache) { return std::make_shared<CacheEntryStore>(cache); }

}  // namespace lockstep
