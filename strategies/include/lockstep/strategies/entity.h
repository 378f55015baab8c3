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
//       .to_columns = [](const Product& p) { return lockstep::SqlParams{p.name, p.price, p.stock}; },
//       .id_of = [](const Product& p) { return p.id; },
//   };
//
// The table must have a BIGINT key column and a BIGINT version column. The repository writes
// version = 1 on insert and version = version + 1 on every update; every cache entry carries
// the version of the row it was made from (cache_entry.h). That one fact is what lets
// WriteThrough and Lease refuse stale sets.
//
// Ids are 64-bit integers.
//
// Thread safety: a plain value; the functions must be safe to call from many threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lockstep/db/row.h"
#include "lockstep/db/sql_value.h"
#include "lockstep/strategies/codec.h"

namespace lockstep {

template <class T>
struct Entity {
    // Names the entity in cache keys, `<prefix>{<name>:<id>}`, and lock names, `<name>:<id>`.
    // Letters, digits, '_', '-', '.' (ConfigError otherwise).
    std::string name;
    // SQL identifiers (letters, digits, '_', '$'); quoted with backticks in every statement.
    std::string table;
    std::string key_column = "id";
    std::string version_column = "version";
    // The columns `to_columns` returns values for, in that order. Not the key or version.
    // Columns of the table that are not listed keep their defaults on insert and are not read.
    std::vector<std::string> columns;
    // Builds a T from a row holding the key, the version and `columns`.
    std::function<T(const Row&)> from_row;
    // The values of `columns` for `value`, in order.
    std::function<SqlParams(const T&)> to_columns;
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
};

}  // namespace lockstep
