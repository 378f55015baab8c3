#include "lockstep/db/table_schema.h"

#include <algorithm>
#include <cctype>

namespace lockstep {

namespace {

bool same_name(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
}

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

}  // namespace

const ColumnSchema* TableSchema::column(std::string_view name) const {
    for (const auto& c : columns) {
        if (same_name(c.name, name)) return &c;
    }
    return nullptr;
}

std::optional<TableSchema> describe_table(MysqlPool& pool, std::string_view table) {
    // EXTRA holds "auto_increment", "VIRTUAL GENERATED" / "STORED GENERATED" (MariaDB also
    // "PERSISTENT GENERATED"), and "on update current_timestamp(...)".
    auto rows = pool.query(
        "SELECT COLUMN_NAME AS n, LOWER(DATA_TYPE) AS t, IS_NULLABLE AS nullable, LOWER(EXTRA) AS extra "
        "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? "
        "ORDER BY ORDINAL_POSITION",
        {std::string(table)});
    if (rows.empty()) return std::nullopt;
    TableSchema schema;
    schema.table = std::string(table);
    for (const auto& row : rows) {
        ColumnSchema c;
        c.name = row.get<std::string>("n");
        c.data_type = row.get<std::string>("t");
        c.nullable = row.get<std::string>("nullable") == "YES";
        const std::string extra = lower(row.get<std::string>("extra"));
        c.auto_increment = extra.find("auto_increment") != std::string::npos;
        c.generated = extra.find("generated") != std::string::npos;
        c.on_update = extra.find("on update") != std::string::npos;
        schema.columns.push_back(std::move(c));
    }
    return schema;
}

}  // namespace lockstep
