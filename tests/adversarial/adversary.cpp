#include "adversary.h"

#include "lockstep/db/mysql_connection.h"

namespace lockstep::adversary {

void to_json(nlohmann::json& j, const Item& i) { j = nlohmann::json{{"id", i.id}, {"name", i.name}}; }

void from_json(const nlohmann::json& j, Item& i) {
    j.at("id").get_to(i.id);
    j.at("name").get_to(i.name);
}

Entity<Item> item_entity() {
    Entity<Item> e;
    e.name = "adv_item";
    e.table = "adv_items";
    e.columns = {"name"};
    e.from_row = [](const Row& r) { return Item{r.get<std::int64_t>("id"), r.get<std::string>("name")}; };
    e.to_columns = [](const Item& i) { return ColumnValues{{"name", i.name}}; };
    e.id_of = [](const Item& i) { return i.id; };
    return e;
}

void create_tables(MysqlPool& pool) {
    pool.execute(
        "CREATE TABLE IF NOT EXISTS adv_items (id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(64) NOT NULL, "
        "version BIGINT NOT NULL DEFAULT 0, fence BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB");
    pool.execute(
        "CREATE TABLE IF NOT EXISTS adv_fenced (id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(64) NOT NULL, "
        "fence BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB");
}

}  // namespace lockstep::adversary
