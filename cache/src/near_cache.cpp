// NearCache: an LRU list with an index, a pending mark per key with a read in flight, and an
// epoch that every drop advances. Invariants, under mutex_:
//   - index_ holds exactly the keys of lru_, each pointing at its node; bytes_ is the sum of
//     their sizes; both bounds hold after every public call returns.
//   - a key is in pending_ only while a read begun after the last drop and after the key's last
//     invalidation has not filled yet.
#include "lockstep/cache/near_cache.h"

#include "lockstep/core/error.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/core/logging.h"

namespace lockstep {

NearCache::NearCache(NearCacheOptions options) : options_(std::move(options)) {
    if (options_.max_entries == 0) throw ConfigError("near_cache.max_entries", "must be positive");
    if (options_.max_bytes == 0) throw ConfigError("near_cache.max_bytes", "must be positive");
    if (options_.ttl <= std::chrono::milliseconds(0)) throw ConfigError("near_cache.ttl", "must be positive");
}

std::optional<NearCache::Entry> NearCache::get(std::string_view key) {
    const auto now = Clock::now();
    MutexLock lock(mutex_);
    const Node* node = find_fresh(key, now);
    if (node == nullptr) return std::nullopt;
    return node->entry;
}

std::optional<NearCache::Entry> NearCache::peek(std::string_view key) const {
    const auto now = Clock::now();
    MutexLock lock(mutex_);
    auto it = index_.find(key);
    if (it == index_.end() || it->second->expires <= now) return std::nullopt;
    return it->second->entry;
}

const NearCache::Node* NearCache::find_fresh(std::string_view key, Clock::time_point now) {
    auto it = index_.find(key);
    if (it == index_.end()) {
        ++counters_.misses;
        return nullptr;
    }
    if (it->second->expires <= now) {
        erase(it->second);
        ++counters_.misses;
        return nullptr;
    }
    lru_.splice(lru_.begin(), lru_, it->second);
    ++counters_.hits;
    return &*it->second;
}

NearCache::Ticket NearCache::begin_fill(const std::string& key) {
    MutexLock lock(mutex_);
    // Bound the marks of reads that never filled (their reader threw): forgetting them only
    // refuses those fills.
    if (pending_.size() >= options_.max_entries) pending_.clear();
    const std::uint64_t mark = ++next_mark_;
    pending_[key] = mark;
    return Ticket{epoch_, mark};
}

bool NearCache::fill(const std::string& key, const Ticket& ticket, std::int64_t version, std::string bytes) {
    fault::point("near.before_fill");
    const auto expires = Clock::now() + options_.ttl;
    MutexLock lock(mutex_);
    auto p = pending_.find(key);
    const bool marked = p != pending_.end() && p->second == ticket.mark;
    if (marked) pending_.erase(p);
    // C12: a read that started before the last drop, or before an invalidation of its key,
    // may carry a value the lost (or just received) invalidation was about.
    if (options_.drop_rule && (ticket.epoch != epoch_ || !marked)) {
        ++counters_.fills_refused;
        return false;
    }
    const std::size_t size = key.size() + bytes.size() + kEntryOverhead;
    if (size > options_.max_bytes) return false;
    if (auto it = index_.find(key); it != index_.end()) {
        if (it->second->entry.version > version) {
            ++counters_.fills_refused;  // never replace a newer local version
            return false;
        }
        erase(it->second);
    }
    lru_.push_front(Node{key, Entry{version, std::move(bytes)}, expires, size});
    index_.emplace(lru_.front().key, lru_.begin());
    bytes_ += size;
    ++counters_.fills;
    evict_to_bounds();
    return true;
}

void NearCache::invalidate(std::string_view key) {
    MutexLock lock(mutex_);
    ++counters_.invalidations;
    if (!options_.drop_rule) {
        // Without the rule an invalidation still removes the entry (that is the channel's
        // purpose); only the in-flight read is not refused.
        if (auto it = index_.find(key); it != index_.end()) erase(it->second);
        return;
    }
    if (auto p = pending_.find(std::string(key)); p != pending_.end()) pending_.erase(p);
    if (auto it = index_.find(key); it != index_.end()) erase(it->second);
}

void NearCache::drop(std::string_view reason) {
    std::size_t dropped = 0;
    {
        MutexLock lock(mutex_);
        ++counters_.drops;
        if (!options_.drop_rule) return;
        dropped = lru_.size();
        ++epoch_;
        index_.clear();
        lru_.clear();
        pending_.clear();
        bytes_ = 0;
    }
    logger()->info("near cache dropped ({} entries): {}", dropped, reason);
}

NearCacheStats NearCache::stats() const {
    MutexLock lock(mutex_);
    NearCacheStats s = counters_;
    s.entries = lru_.size();
    s.bytes = bytes_;
    return s;
}

void NearCache::erase(Lru::iterator it) {
    bytes_ -= it->size;
    index_.erase(it->key);
    lru_.erase(it);
}

void NearCache::evict_to_bounds() {
    while (!lru_.empty() && (lru_.size() > options_.max_entries || bytes_ > options_.max_bytes)) {
        erase(std::prev(lru_.end()));
        ++counters_.evictions;
    }
}

}  // namespace lockstep
