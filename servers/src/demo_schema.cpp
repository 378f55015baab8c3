#include "lockstep/servers/demo_schema.h"

#include <set>
#include <string>
#include <utility>

#include "lockstep/core/error.h"
#include "lockstep/core/logging.h"
#include "lockstep/strategies/outbox.h"

namespace lockstep::testing {
namespace {

constexpr std::string_view kProducts = R"sql(CREATE TABLE IF NOT EXISTS products (
  id BIGINT NOT NULL,
  name VARCHAR(255) NOT NULL,
  price BIGINT NOT NULL COMMENT 'cents',
  stock INT NOT NULL,
  version BIGINT NOT NULL DEFAULT 0,
  fence BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4)sql";

constexpr std::string_view kOrders = R"sql(CREATE TABLE IF NOT EXISTS orders (
  id BIGINT NOT NULL AUTO_INCREMENT,
  product_id BIGINT NOT NULL,
  quantity INT NOT NULL,
  status ENUM('unpaid','paid','closed') NOT NULL DEFAULT 'unpaid',
  created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  updated_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  KEY orders_by_status_age (status, created_at),
  KEY orders_by_product (product_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4)sql";

// The columns the demo's SQL relies on, per table.
const std::vector<std::pair<std::string, std::vector<std::string>>>& required_columns() {
    static const std::vector<std::pair<std::string, std::vector<std::string>>> columns = {
        {"products", {"id", "name", "price", "stock", "version", "fence"}},
        {"orders", {"id", "product_id", "quantity", "status", "created_at", "updated_at"}},
        {"outbox", {"id", "cache_key", "created_at"}},
    };
    return columns;
}

void verify_columns(MysqlConnection& conn) {
    std::set<std::pair<std::string, std::string>> present;
    for (const Row& row :
         conn.query("SELECT LOWER(TABLE_NAME) AS t, LOWER(COLUMN_NAME) AS c "
                    "FROM information_schema.COLUMNS "
                    "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN ('products', 'orders', 'outbox')")) {
        present.emplace(row.get<std::string>("t"), row.get<std::string>("c"));
    }
    for (const auto& [table, columns] : required_columns()) {
        for (const auto& column : columns) {
            if (!present.count({table, column})) {
                throw ConfigError("schema",
                                  "table '" + table + "' exists without column '" + column +
                                      "'; migrate or drop it (bootstrap never alters existing tables)");
            }
        }
    }
}

}  // namespace

const std::vector<std::string_view>& demo_schema_statements() {
    static const std::vector<std::string_view> statements = {kProducts, kOrders, outbox_table_statement()};
    return statements;
}

void bootstrap_demo_schema(MysqlConnection& connection) {
    for (std::string_view statement : demo_schema_statements()) connection.execute_unprepared(statement);
    verify_columns(connection);
    logger()->debug("mysql: demo schema ready (products, orders, outbox)");
}

void bootstrap_demo_schema(MysqlPool& pool) {
    PooledMysqlConnection conn = pool.acquire();
    bootstrap_demo_schema(*conn);
}

}  // namespace lockstep::testing
