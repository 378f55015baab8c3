// Row: one row of a query result, copied out of the connection (it stays valid after the
// connection is returned), with typed getters by column name:
//
//   std::optional<lockstep::Row> row = pool.query_one("SELECT name, price, note FROM ...", {id});
//   std::string name = row->get<std::string>("name");
//   std::int64_t cents = row->get<std::int64_t>("price");
//   std::optional<std::string> note = row->get<std::optional<std::string>>("note");  // NULL-able
//
// How MySQL column types arrive (see SqlValue): every integer type (TINYINT .. BIGINT, BIT,
// YEAR) is an int64; FLOAT and DOUBLE are a double; everything else is a string, including
// DECIMAL (kept exact: CAST it to SIGNED in SQL, or parse it), DATE/DATETIME/TIMESTAMP
// ('2026-11-20 10:00:00'), ENUM, SET, JSON, and the binary types (bytes).
//
// The getters are strict and say why: a missing column, a column of another type, or a NULL
// read into a non-optional type each throw a ProtocolError naming the column, its SQL type and
// the columns that do exist. Column names are matched case-insensitively, as MySQL does; if a
// result has two columns of one name (a join), the first wins: give them aliases.
//
// Thread safety: a plain value; const access from several threads is safe.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/db/sql_value.h"

namespace lockstep {

// The columns of one result, shared by all of its rows.
struct RowColumns {
    std::vector<std::string> names;      // labels: the alias when the query gives one
    std::vector<std::string> sql_types;  // e.g. "BIGINT", "VARCHAR", for error messages
};

namespace detail {
template <class T>
inline constexpr bool is_optional_v = false;
template <class T>
inline constexpr bool is_optional_v<std::optional<T>> = true;

template <class T>
concept RowScalar = std::same_as<T, std::int64_t> || std::same_as<T, int> || std::same_as<T, bool> ||
    std::same_as<T, double> || std::same_as<T, std::string>;
}  // namespace detail

// The types Row::get can produce: int64_t, int (range-checked), bool (an integer, 0 is false),
// double, std::string, and std::optional of any of these (NULL becomes std::nullopt).
template <class T>
concept RowValue = detail::RowScalar<T> ||
    (detail::is_optional_v<T>&& detail::RowScalar<typename T::value_type>);

class Row {
public:
    Row(std::shared_ptr<const RowColumns> columns, std::vector<SqlValue> values);

    std::size_t size() const noexcept { return values_.size(); }
    const std::vector<std::string>& column_names() const noexcept { return columns_->names; }
    bool has_column(std::string_view column) const noexcept;

    // The raw cell. Throws ProtocolError for a missing column or an index out of range.
    const SqlValue& at(std::string_view column) const;
    const SqlValue& at(std::size_t index) const;
    bool is_null(std::string_view column) const { return at(column).is_null(); }

    template <RowValue T>
    T get(std::string_view column) const {
        if constexpr (detail::is_optional_v<T>) {
            if (is_null(column)) return std::nullopt;
            return get<typename T::value_type>(column);
        } else if constexpr (std::same_as<T, std::int64_t>) {
            return get_int64(column);
        } else if constexpr (std::same_as<T, int>) {
            return get_int(column);
        } else if constexpr (std::same_as<T, bool>) {
            return get_int64(column) != 0;
        } else if constexpr (std::same_as<T, double>) {
            return get_double(column);
        } else {
            return get_string(column);
        }
    }

private:
    std::size_t index_of(std::string_view column) const;
    // `wanted` names the requested C++ type in the error message.
    const SqlValue& typed(std::string_view column, SqlValue::Type type, std::string_view wanted) const;
    std::int64_t get_int64(std::string_view column) const;
    int get_int(std::string_view column) const;
    double get_double(std::string_view column) const;
    std::string get_string(std::string_view column) const;

    std::shared_ptr<const RowColumns> columns_;
    std::vector<SqlValue> values_;
};

}  // namespace lockstep
