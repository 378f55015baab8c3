// The demo's rows: products with a stock, and their orders. Every case of every scenario works on
// fresh product ids (DemoContext::new_ids), so runs never see each other's rows.
#pragma once

#include <cstdint>
#include <string>

namespace lockstep {
class MysqlPool;
}

namespace lockstep::demo {

// Inserts product `id` with `stock` units, version 1, fence 0.
void insert_product(MysqlPool& db, std::int64_t id, int stock, const std::string& name = "demo item");
// The stock column of product `id`.
int stock_of(MysqlPool& db, std::int64_t id);
// Orders of product `id` (optionally only those with `status`) and their units.
long long orders_of(MysqlPool& db, std::int64_t id, const std::string& status = "");
long long units_ordered(MysqlPool& db, std::int64_t id, const std::string& status = "");

}  // namespace lockstep::demo
