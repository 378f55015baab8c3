// What one repository is made of and never changes after construction: its table (spec, SQL,
// the facts checked against the live schema), its servers, its validated options and strategy,
// its key names and the claim on its key space. Every component reads it; none writes it.
//
// Thread safety: immutable after construction; value_ttl() may be called from any thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "entity_sql.h"
#include "entity_table_check.h"
#include "key_space_claim.h"
#include "lockstep/strategies/entity_keys.h"
#include "lockstep/strategies/entry_store.h"
#include "lockstep/strategies/repository_core.h"
#include "lockstep/strategies/repository_options.h"
#include "lockstep/strategies/write_strategy.h"

namespace lockstep::detail {

struct RepositoryConfig {
    // ConfigError when an option is out of range, the store is missing, or the table does not
    // match the entity (check_entity_table).
    RepositoryConfig(TableSpec spec, MysqlPool& db, std::shared_ptr<EntryStore> store, RepositoryOptions options);

    const std::string& name() const noexcept { return spec.name; }
    // TTL of a value entry: `ttl` plus a random jitter, as the strategy bounds it (TtlBounding),
    // plus `max_stale` (stale-while-revalidate: the entry is stale once its remaining TTL is at
    // most max_stale).
    std::chrono::milliseconds value_ttl() const;
    // TTL of a "not found" entry (C7), as the strategy bounds it.
    std::chrono::milliseconds negative_ttl() const;

    TableSpec spec;
    EntitySql sql;
    MysqlPool& db;
    std::shared_ptr<EntryStore> store;
    RepositoryOptions opts;
    std::shared_ptr<const WriteStrategy> strategy;
    EntityKeys keys;
    KeySpaceClaim key_space;
    TableFacts table;
    // The longest an entry can live: after this, a delete that never landed is moot.
    std::chrono::milliseconds max_entry_lifetime{0};
};

}  // namespace lockstep::detail
