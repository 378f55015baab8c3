#include "lockstep/db/row.h"

#include <limits>

#include "lockstep/core/error.h"

namespace lockstep {
namespace {

bool equals_ignoring_case(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; };
        if (lower(a[i]) != lower(b[i])) return false;
    }
    return true;
}

}  // namespace

Row::Row(std::shared_ptr<const RowColumns> columns, std::vector<SqlValue> values)
    : columns_(std::move(columns)), values_(std::move(values)) {
    if (!columns_) columns_ = std::make_shared<const RowColumns>();
    if (columns_->names.size() != values_.size()) {
        throw ProtocolError("Row: " + std::to_string(values_.size()) + " values for " +
                            std::to_string(columns_->names.size()) + " columns");
    }
}

bool Row::has_column(std::string_view column) const noexcept {
    for (const auto& name : columns_->names) {
        if (equals_ignoring_case(name, column)) return true;
    }
    return false;
}

std::size_t Row::index_of(std::string_view column) const {
    const auto& names = columns_->names;
    for (std::size_t i = 0; i < names.size(); ++i) {
        if (equals_ignoring_case(names[i], column)) return i;
    }
    std::string known;
    for (const auto& name : names) known += (known.empty() ? "" : ", ") + name;
    throw ProtocolError("Row: no column '" + std::string(column) + "' (columns: " + known + ")");
}

const SqlValue& Row::at(std::string_view column) const {
    return values_[index_of(column)];
}

const SqlValue& Row::at(std::size_t index) const {
    if (index >= values_.size()) {
        throw ProtocolError("Row: column index " + std::to_string(index) + " out of range (" +
                            std::to_string(values_.size()) + " columns)");
    }
    return values_[index];
}

const SqlValue& Row::typed(std::string_view column, SqlValue::Type type, std::string_view wanted) const {
    const std::size_t i = index_of(column);
    const SqlValue& v = values_[i];
    if (v.type() == type) return v;
    const std::string& name = columns_->names[i];
    const std::string& sql_type = columns_->sql_types.size() > i ? columns_->sql_types[i] : "?";
    if (v.is_null()) {
        throw ProtocolError("Row: column '" + name + "' (" + sql_type +
                            ") is NULL; read it as std::optional<" + std::string(wanted) + ">");
    }
    throw ProtocolError("Row: column '" + name + "' is " + sql_type + " (read as " +
                        std::string(to_string(v.type())) + "), not " + std::string(wanted));
}

std::int64_t Row::get_int64(std::string_view column) const {
    return typed(column, SqlValue::Type::Int64, "int64").as_int64();
}

int Row::get_int(std::string_view column) const {
    const std::int64_t v = typed(column, SqlValue::Type::Int64, "int").as_int64();
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
        throw ProtocolError("Row: column '" + std::string(column) +
                            "' holds a value that does not fit an int; read it as int64_t");
    }
    return static_cast<int>(v);
}

double Row::get_double(std::string_view column) const {
    return typed(column, SqlValue::Type::Double, "double").as_double();
}

std::string Row::get_string(std::string_view column) const {
    return typed(column, SqlValue::Type::String, "std::string").as_string();
}

}  // namespace lockstep
