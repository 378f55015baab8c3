// InvalidationMap: which cache keys a changed row invalidates.
//
//   InvalidationMap map({{.table = "products", .entity = "product"},
//                        {.table = "products", .entity = "product_card", .prefix = "ui:"}});
//   map.keys_for("lockstep", "products", 42)  -> {"ls:{product:42}", "ui:{product_card:42}"}
//
// One table may feed several entities (every one is invalidated); the key column is the
// entity's BIGINT id (Entity<T>::key_column, "id" by default). A binding's key is exactly what
// EntityKeys(prefix, entity).value(id) builds, so the follower deletes the very key the
// repository fills.
//
// Thread safety: immutable after construction.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/strategies/entity_keys.h"

namespace lockstep {

struct TableBinding {
    // The table; `database` empty means the table of that name in any schema.
    std::string table;
    std::string database;
    // Entity<T>::name and the repository's key prefix (RepositoryOptions: "ls:" by default).
    std::string entity;
    std::string prefix = "ls:";
    // The BIGINT column that holds the entity id.
    std::string key_column = "id";
};

class InvalidationMap {
public:
    // Throws ConfigError for an empty table or entity, or a name EntityKeys refuses.
    explicit InvalidationMap(std::vector<TableBinding> bindings);

    // The bindings for `table` in `database`. Names compare case-insensitively on purpose: a
    // missed match is a lost invalidation, an extra match only an extra delete.
    std::vector<const TableBinding*> bindings_for(std::string_view database, std::string_view table) const;
    bool watches(std::string_view database, std::string_view table) const;

    // The cache key of `id` under `binding`. REQUIRES: `binding` is one of this map's own
    // (from bindings_for or bindings()); ConfigError otherwise.
    std::string key(const TableBinding& binding, std::int64_t id) const;
    // A Redis SCAN pattern matching every value key of `binding`'s entity (and no lock key):
    // "<prefix>{<entity>:*}" with glob characters of the prefix escaped.
    std::string scan_pattern(const TableBinding& binding) const;

    const std::vector<TableBinding>& bindings() const noexcept { return bindings_; }

private:
    std::vector<TableBinding> bindings_;
    std::vector<EntityKeys> keys_;  // one per binding, same order
};

}  // namespace lockstep
