#include "replica_reads.h"

#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"
#include "lockstep/strategies/entry_store.h"

namespace lockstep::detail {

namespace {
// What a marker holds: anything non-empty; its presence is the message.
const std::string kRecentEntry = "recent";
}  // namespace

ReplicaReads::ReplicaReads(MysqlPool& primary, MysqlPool* replica, std::chrono::milliseconds window,
                           EntryStore& store)
    : primary_(primary), replica_(replica), window_(window), store_(store) {}

void ReplicaReads::mark_written(const std::string& key) {
    if (replica_ == nullptr || window_.count() <= 0) return;
    Fill f;
    f.key = marker_key(key);
    f.entry = kRecentEntry;
    f.ttl = window_;  // SET ... PX: a second write inside the window extends it
    f.mode = FillMode::Always;
    try {
        store_.fill(f);
    } catch (const Error& e) {
        const auto n = marks_failed_.fetch_add(1, std::memory_order_relaxed) + 1;
        logger()->warn("read replica: cannot mark {} as recently written ({} so far); a miss may read the replica "
                       "before it applied this write: {}",
                       key, n, e.what());
    }
}

MysqlPool& ReplicaReads::to_primary() {
    primary_loads_.fetch_add(1, std::memory_order_relaxed);
    return primary_;
}

MysqlPool& ReplicaReads::pool_for(const std::string& key) {
    if (replica_ == nullptr) return primary_;
    if (window_.count() > 0) {
        try {
            if (store_.get(marker_key(key))) return to_primary();
        } catch (const Error&) {
            return to_primary();  // cannot tell: the primary is never stale
        }
    }
    replica_loads_.fetch_add(1, std::memory_order_relaxed);
    return *replica_;
}

MysqlPool& ReplicaReads::pool_for(const std::vector<std::string>& keys) {
    if (replica_ == nullptr) return primary_;
    if (window_.count() > 0 && !keys.empty()) {
        std::vector<std::string> markers;
        markers.reserve(keys.size());
        for (const auto& k : keys) markers.push_back(marker_key(k));
        try {
            for (const auto& m : store_.get_many(markers)) {
                if (m) return to_primary();
            }
        } catch (const Error&) {
            return to_primary();
        }
    }
    replica_loads_.fetch_add(1, std::memory_order_relaxed);
    return *replica_;
}

}  // namespace lockstep::detail
