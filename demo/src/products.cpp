#include "products.h"

#include "lockstep/db/mysql_pool.h"

namespace lockstep::demo {

void insert_product(MysqlPool& db, std::int64_t id, int stock, const std::string& name) {
    db.execute("INSERT INTO products (id, name, price, stock, version, fence) VALUES (?, ?, 1000, ?, 1, 0)",
               {id, name, stock});
}

int stock_of(MysqlPool& db, std::int64_t id) {
    return db.query_one("SELECT stock FROM products WHERE id = ?", {id})->get<int>("stock");
}

long long orders_of(MysqlPool& db, std::int64_t id, const std::string& status) {
    if (status.empty()) {
        return db.query_one("SELECT COUNT(*) AS n FROM orders WHERE product_id = ?", {id})->get<std::int64_t>("n");
    }
    return db.query_one("SELECT COUNT(*) AS n FROM orders WHERE product_id = ? AND status = ?", {id, status})
        ->get<std::int64_t>("n");
}

long long units_ordered(MysqlPool& db, std::int64_t id, const std::string& status) {
    if (status.empty()) {
        return db.query_one("SELECT CAST(COALESCE(SUM(quantity), 0) AS SIGNED) AS n FROM orders WHERE product_id = ?",
                            {id})
            ->get<std::int64_t>("n");
    }
    return db.query_one(
                 "SELECT CAST(COALESCE(SUM(quantity), 0) AS SIGNED) AS n FROM orders WHERE product_id = ? AND status = ?",
                 {id, status})
        ->get<std::int64_t>("n");
}

}  // namespace lockstep::demo
