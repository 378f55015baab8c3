// SqlValue: one parameter of a prepared statement, or one cell of a result row. A small closed
// set of types: NULL, 64-bit signed integer, double, and string. Strings are byte strings: they
// may hold NUL bytes and bytes that are not UTF-8 (BLOB, VARBINARY) and round-trip unchanged.
//
//   pool.execute("UPDATE products SET name = ?, price = ? WHERE id = ?", {"lamp", 1999, id});
//   pool.query("SELECT * FROM orders WHERE status = ? AND note <=> ?", {"paid", nullptr});
//
// Conversions are implicit from the natural C++ types (integers, bool, double, std::string,
// std::string_view, const char*, nullptr, std::nullopt, std::optional<T>), so a parameter list
// is a plain braced list. An unsigned value above INT64_MAX is refused with a ConfigError rather
// than wrapped into a negative number.
//
// Thread safety: a plain value type.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace lockstep {

// The SQL NULL. `sql_null`, `nullptr` and `std::nullopt` all convert to it.
struct SqlNull {
    friend bool operator==(SqlNull, SqlNull) noexcept { return true; }
};
inline constexpr SqlNull sql_null{};

class SqlValue {
public:
    enum class Type { Null, Int64, Double, String };
    using Variant = std::variant<SqlNull, std::int64_t, double, std::string>;

    SqlValue() noexcept = default;  // NULL
    SqlValue(SqlNull) noexcept {}
    SqlValue(std::nullptr_t) noexcept {}
    SqlValue(std::nullopt_t) noexcept {}
    // MySQL has no boolean type: BOOL is TINYINT(1), so true is 1.
    SqlValue(bool v) noexcept : value_(std::int64_t{v ? 1 : 0}) {}
    template <std::signed_integral T>
    SqlValue(T v) noexcept : value_(static_cast<std::int64_t>(v)) {}
    template <std::unsigned_integral T>
    requires(!std::same_as<T, bool>) SqlValue(T v)
        : value_(checked_unsigned(static_cast<std::uint64_t>(v))) {}
    SqlValue(double v) noexcept : value_(v) {}
    SqlValue(float v) noexcept : value_(static_cast<double>(v)) {}
    SqlValue(std::string v) noexcept : value_(std::move(v)) {}
    SqlValue(std::string_view v) : value_(std::string(v)) {}
    // A null `const char*` is SQL NULL, not a crash.
    SqlValue(const char* v) {
        if (v != nullptr) value_ = std::string(v);
    }
    template <class T>
    SqlValue(const std::optional<T>& v) : SqlValue() {
        if (v) *this = SqlValue(*v);
    }

    Type type() const noexcept { return static_cast<Type>(value_.index()); }
    bool is_null() const noexcept { return type() == Type::Null; }

    // Typed access. Each throws a ProtocolError naming the actual type when it differs
    // (a NULL is not a 0 and not an empty string).
    std::int64_t as_int64() const;
    double as_double() const;
    const std::string& as_string() const;

    const Variant& variant() const noexcept { return value_; }

    // For a caller's debugging (the library never logs it: a value may be row content): NULL, 42,
    // 1.5, 'text'. Bytes outside printable ASCII are written \xNN; strings are cut at 64 bytes.
    std::string describe() const;

    friend bool operator==(const SqlValue&, const SqlValue&) = default;

private:
    static std::int64_t checked_unsigned(std::uint64_t v);
    Variant value_;
};

std::string_view to_string(SqlValue::Type type) noexcept;

// The parameters of one statement, bound to its '?' placeholders in order.
using SqlParams = std::vector<SqlValue>;

}  // namespace lockstep
