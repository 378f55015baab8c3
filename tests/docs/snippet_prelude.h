// The common prelude of every ```cpp fragment and ```cpp declarations block of the docs
// (tests/docs/compile_snippets.sh): the library's public headers and the std::chrono literals,
// so that a fragment reads as a reader would write it after including what the page names.
#pragma once

#include "lockstep/cache/cache.h"
#include "lockstep/cache/cluster_unavailable_error.h"
#include "lockstep/cache/redis_cache.h"
#include "lockstep/cache/redis_client.h"
#include "lockstep/cache/redis_cluster_slot.h"
#include "lockstep/cache/redis_connection.h"
#include "lockstep/cache/redis_connection_pool.h"
#include "lockstep/cache/redis_master_change.h"
#include "lockstep/cache/redis_reply.h"
#include "lockstep/cache/redis_script.h"
#include "lockstep/cache/redis_subscriber.h"
#include "lockstep/cache/redis_time.h"
#include "lockstep/coordination/job_lock.h"
#include "lockstep/coordination/job_run_record.h"
#include "lockstep/coordination/job_runner.h"
#include "lockstep/coordination/job_schedule.h"
#include "lockstep/coordination/leader_latch.h"
#include "lockstep/coordination/multi_lock.h"
#include "lockstep/coordination/semaphore.h"
#include "lockstep/core/error.h"
#include "lockstep/core/fault_point.h"
#include "lockstep/core/latency_histogram.h"
#include "lockstep/core/log_limiter.h"
#include "lockstep/core/logging.h"
#include "lockstep/core/mutex.h"
#include "lockstep/core/mysql_options.h"
#include "lockstep/core/names.h"
#include "lockstep/core/redis_options.h"
#include "lockstep/core/thread_annotations.h"
#include "lockstep/core/uri.h"
#include "lockstep/db/db.h"
#include "lockstep/db/fenced_write.h"
#include "lockstep/db/mysql_connection.h"
#include "lockstep/db/mysql_pool.h"
#include "lockstep/db/pooled_mysql_connection.h"
#include "lockstep/db/row.h"
#include "lockstep/servers/demo_schema.h"
#include "lockstep/db/sql_value.h"
#include "lockstep/db/table_schema.h"
#include "lockstep/db/transaction.h"
#include "lockstep/invalidation/binlog_errors.h"
#include "lockstep/invalidation/binlog_event.h"
#include "lockstep/invalidation/binlog_invalidator.h"
#include "lockstep/invalidation/binlog_stream.h"
#include "lockstep/invalidation/consistency_inspector.h"
#include "lockstep/invalidation/fault_points.h"
#include "lockstep/invalidation/gtid_state.h"
#include "lockstep/invalidation/inspected_entity.h"
#include "lockstep/invalidation/invalidation_map.h"
#include "lockstep/invalidation/position_store.h"
#include "lockstep/locks/distributed_mutex.h"
#include "lockstep/locks/distributed_read_write_lock.h"
#include "lockstep/locks/in_memory_lock_service.h"
#include "lockstep/locks/lock_client.h"
#include "lockstep/locks/lock_errors.h"
#include "lockstep/locks/lock_keys.h"
#include "lockstep/locks/lock_loss.h"
#include "lockstep/locks/lock_options.h"
#include "lockstep/locks/lock_service.h"
#include "lockstep/locks/mysql_lock_service.h"
#include "lockstep/locks/redis_fair_lock_service.h"
#include "lockstep/locks/redis_lock_service.h"
#include "lockstep/locks/redis_mutex.h"
#include "lockstep/locks/redis_read_write_lock.h"
#include "lockstep/locks/redlock_lock_service.h"
#include "lockstep/locks/segmented_stock.h"
#include "lockstep/locks/steady_deadline.h"
#include "lockstep/locks/zookeeper_lock_service.h"
#include "lockstep/strategies/background_scheduler.h"
#include "lockstep/strategies/binary_codec.h"
#include "lockstep/strategies/cache_entry.h"
#include "lockstep/strategies/cached_repository.h"
#include "lockstep/strategies/codec.h"
#include "lockstep/strategies/delayed_double_delete.h"
#include "lockstep/strategies/entity.h"
#include "lockstep/strategies/entity_keys.h"
#include "lockstep/strategies/entry_store.h"
#include "lockstep/strategies/fault_points.h"
#include "lockstep/strategies/lease.h"
#include "lockstep/strategies/lock_mode.h"
#include "lockstep/strategies/outbox.h"
#include "lockstep/strategies/repository_core.h"
#include "lockstep/strategies/repository_metrics.h"
#include "lockstep/strategies/repository_options.h"
#include "lockstep/strategies/strategies.h"
#include "lockstep/strategies/ttl_bounding.h"
#include "lockstep/strategies/write_strategy.h"
#include "lockstep/strategies/write_then_delete.h"
#include "lockstep/strategies/write_through.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

using namespace std::chrono_literals;

// The product the pages' examples cache (as in the demo's products table), so that a fragment
// can name `Product` and `lockstep::CachedRepository<Product>` without declaring it again.
struct Product {
    std::int64_t id = 0;
    std::string name;
    std::int64_t price = 0;
    std::int64_t stock = 0;
};
template <class Fields>
void lockstep_binary_fields(Fields& f, Product& p) { f(p.id, p.name, p.price, p.stock); }
