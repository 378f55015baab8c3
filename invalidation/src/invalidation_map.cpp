#include "lockstep/invalidation/invalidation_map.h"

#include <algorithm>
#include <cctype>

#include "lockstep/core/error.h"

namespace lockstep {

namespace {

bool same_name(std::string_view a, std::string_view b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
        return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
    });
}

}  // namespace

InvalidationMap::InvalidationMap(std::vector<TableBinding> bindings) : bindings_(std::move(bindings)) {
    for (const auto& b : bindings_) {
        if (b.table.empty()) throw ConfigError("table binding", "no table");
        if (b.entity.empty()) throw ConfigError("table binding of " + b.table, "no entity");
        if (b.key_column.empty()) throw ConfigError("table binding of " + b.table, "no key column");
        keys_.emplace_back(b.prefix, b.entity);  // validates prefix and name (ConfigError)
    }
}

std::vector<const TableBinding*> InvalidationMap::bindings_for(std::string_view database, std::string_view table) const {
    std::vector<const TableBinding*> out;
    for (const auto& b : bindings_) {
        if (same_name(b.table, table) && (b.database.empty() || same_name(b.database, database))) out.push_back(&b);
    }
    return out;
}

bool InvalidationMap::watches(std::string_view database, std::string_view table) const {
    return !bindings_for(database, table).empty();
}

std::string InvalidationMap::key(const TableBinding& binding, std::int64_t id) const {
    // REQUIRES: `binding` is one of this map's own (bindings_for / bindings()).
    if (bindings_.empty() || &binding < bindings_.data() || &binding >= bindings_.data() + bindings_.size()) {
        throw ConfigError("binding", "not one of this map's bindings");
    }
    return keys_[static_cast<std::size_t>(&binding - bindings_.data())].value(id);
}

std::string InvalidationMap::scan_pattern(const TableBinding& binding) const {
    std::string out;
    for (char c : binding.prefix) {
        if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
        out += c;
    }
    return out + "{" + binding.entity + ":*}";
}

}  // namespace lockstep
