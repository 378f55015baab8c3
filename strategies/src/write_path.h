// WritePath: insert, update and remove of a repository, each one transaction with the
// strategy's cache steps around its COMMIT. The stages and the race each closes are listed at
// the top of write_path.cpp.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "cache_health.h"
#include "delete_queue.h"
#include "key_lock.h"
#include "key_trace.h"
#include "replica_reads.h"
#include "repository_config.h"
#include "repository_stats.h"

namespace lockstep::detail {

// What a write uses, all borrowed from the repository that owns the path.
struct WriteParts {
    const RepositoryConfig& config;
    ReplicaReads& replica;
    RepositoryStats& stats;
    CacheHealth& health;
    KeyTrace& trace;
    KeyLocks& locks;
    DeleteQueue& deletes;
};

class WritePath {
public:
    explicit WritePath(WriteParts parts) : p_(parts) {}

    // See RepositoryCore::update, insert, remove.
    std::optional<std::int64_t> update(std::int64_t id, const std::function<ColumnValues(const Row&)>& mutate,
                                       ValueSink& sink, std::optional<FenceCheck> fence);
    std::int64_t insert(std::int64_t id, const ColumnValues& columns, ValueSink& sink);
    bool remove(std::int64_t id);

private:
    // The values of `columns`, ordered as spec.columns; ConfigError naming every mismatch.
    SqlParams ordered(const ColumnValues& columns) const;

    WriteParts p_;
};

}  // namespace lockstep::detail
