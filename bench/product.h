// The entity every repository benchmark reads and writes: a row of the demo's `products` table,
// cached by the repository's default codec: BinaryCodec, since it lists its fields below
// (JsonCodec for a type that only has to_json/from_json); the codec rows set each explicitly.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "lockstep/strategies/entity.h"

namespace lockstep::bench {

struct Product {
    std::int64_t id = 0;
    std::string name;
    std::int64_t price = 0;
    int stock = 0;
    // The row version, filled from database rows only (the cache entry carries it separately).
    std::int64_t version = 0;
};

inline void to_json(nlohmann::json& j, const Product& p) {
    j = nlohmann::json{{"id", p.id}, {"name", p.name}, {"price", p.price}, {"stock", p.stock}};
}

inline void from_json(const nlohmann::json& j, Product& p) {
    j.at("id").get_to(p.id);
    j.at("name").get_to(p.name);
    j.at("price").get_to(p.price);
    j.at("stock").get_to(p.stock);
}

// The field list for BinaryCodec<Product> (lockstep/strategies/binary_codec.h): the cache-hit
// row's codec micro-benchmark decodes the same product both ways. The version is not cached
// (the envelope carries it), as with JSON.
template <class Fields>
void lockstep_binary_fields(Fields& f, Product& p) {
    f(p.id, p.name, p.price, p.stock);
}

inline Entity<Product> product_entity() {
    Entity<Product> e;
    e.name = "product";
    e.table = "products";
    e.columns = {"name", "price", "stock"};
    e.from_row = [](const Row& r) {
        return Product{r.get<std::int64_t>("id"), r.get<std::string>("name"), r.get<std::int64_t>("price"),
                       r.get<int>("stock"), r.get<std::int64_t>("version")};
    };
    e.to_columns = [](const Product& p) { return ColumnValues{{"name", p.name}, {"price", p.price}, {"stock", p.stock}}; };
    e.id_of = [](const Product& p) { return p.id; };
    return e;
}

}  // namespace lockstep::bench
