// The strategies layer in one include: CachedRepository<T>, Entity<T>, the write strategies,
// lock modes, options, metrics, the cache-entry envelope and the EntryStore it lives in.
// docs/strategies.md explains how to choose per entity.
#pragma once

#include "lockstep/strategies/background_scheduler.h"
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
#include "lockstep/strategies/repository_metrics.h"
#include "lockstep/strategies/repository_options.h"
#include "lockstep/strategies/ttl_bounding.h"
#include "lockstep/strategies/write_strategy.h"
#include "lockstep/strategies/write_then_delete.h"
#include "lockstep/strategies/write_through.h"
