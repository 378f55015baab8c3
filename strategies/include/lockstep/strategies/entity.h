// Entity<T>: everything the repository needs to know about one entity type, said once.
//
//   struct Product { std::int64_t id; std::string name; std::int64_t price; int stock; };
//   // to_json / from_json for Product (nlohmann-json), for the default JsonCodec
//
//   lockstep::Entity<Product> products{
//       .name = "product",                 // keys: ls:{product:42}
//       .table = "products",
//       .columns = {"name", "price", "stock"},
//       .from_row = [](const lockstep::Row& r) {
//           return Product{r.get<std::int64_t>("id"), r.get<std::string>("name"),
//                          r.get<std::int64_t>("price"), r.get<int>("stock")};
//       },
//       .to_columns = [](const Product& p) {
//           return lockstep::ColumnValues{{"name", p.name}, {"price", p.price}, {"stock", p.stock}};
//       },
//       .id_of = [](const Product& p) { return p.id; },
//   };
//
// The table contract (docs/tables.md): a BIGINT NOT NULL key column and a BIGINT NOT NULL
// version column (and, for update_fenced, a BIGINT NOT NULL fence column). The repository writes
// version = max(version + 1, database clock in µs), so versions never go backwards for a key,
// also across a delete and re-insert (C11); every cache entry carries the version of the row it
// was made from (cache_entry.h). That is what lets WriteThrough and Lease refuse stale sets.
// The entity is checked against the live table when the repository is constructed: every
// problem is named in one ConfigError.
//
// Ids are 64-bit integers. With an AUTO_INCREMENT key column, insert() of a value whose id is
// 0 lets the database choose the id and returns the stored value carrying it.
//
// Thread safety: a plain value; the functions must be safe to call from many threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/db/row.h"
#include "lockstep/db/sql_value.h"
#include "lockstep/strategies/codec.h"

namespace lockstep {

// Column values by name: {{"name", p.name}, {"price", p.price}}.
using ColumnValues = std::vector<std::pair<std::string, SqlValue>>;

template <class T>
struct Entity {
    // Names the entity in cache keys, `<prefix>{<name>:<id>}`, and lock names, `<name>:<id>`.
    // Letters, digits, '_', '-', '.' (ConfigError otherwise).
    std::string name;
    // SQL identifiers (letters, digits, '_', '$'); quoted with backticks in every statement.
    std::string table;
    std::string key_column = "id";
    std::string version_column = "version";
    // The columns the repository writes (insert, update) and reads. Not the key or version.
    // Columns of the table that are not listed keep their defaults on insert and are not read.
    std::vector<std::string> columns;
    // Columns the database manages (DEFAULT, ON UPDATE CURRENT_TIMESTAMP, GENERATED, triggers):
    // read and cached, never written. insert() and update() re-read the written row, so the
    // value they return holds what the database stored, for every strategy.
    std::vector<std::string> read_only_columns;
    // Optional: the BIGINT NOT NULL column holding the newest fencing token that wrote the row,
    // for update_fenced() (L5, L8). Neither written nor read by the other operations.
    std::string fence_column;
    // Builds a T from a row holding the key, the version, `columns` and `read_only_columns`.
    std::function<T(const Row&)> from_row;
    // The values of `columns` for `value`, BY NAME, in any order. A name that is not in
    // `columns`, a missing one or a duplicate is a ConfigError at the write: two values can
    // never land in each other's columns silently.
    std::function<ColumnValues(const T&)> to_columns;
    // The key of `value`.
    std::function<std::int64_t(const T&)> id_of;
    // T <-> payload bytes. Null: JsonCodec<T> (a ConfigError if T has no to_json/from_json).
    std::shared_ptr<const Codec<T>> codec;
};

// A value together with the row version it was read at.
template <class T>
struct Versioned {
    T value;
    std::int64_t version = 0;
    // True when the value is a cached entry past its TTL, served while another reader refills
    // it (RepositoryOptions::max_stale). Never true for a value a write invalidated.
    bool stale = false;
};

}  // namespace lockstep
