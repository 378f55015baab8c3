#include "lockstep/db/sql_value.h"

#include <cstdio>
#include <limits>

#include "lockstep/core/error.h"

namespace lockstep {

std::string_view to_string(SqlValue::Type type) noexcept {
    switch (type) {
        case SqlValue::Type::Null:
            return "NULL";
        case SqlValue::Type::Int64:
            return "int64";
        case SqlValue::Type::Double:
            return "double";
        case SqlValue::Type::String:
            return "string";
    }
    return "unknown";
}

std::int64_t SqlValue::checked_unsigned(std::uint64_t v) {
    if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        throw ConfigError("SQL parameter", "an unsigned value above 2^63-1 does not fit a signed 64-bit integer");
    }
    return static_cast<std::int64_t>(v);
}

std::int64_t SqlValue::as_int64() const {
    if (const auto* v = std::get_if<std::int64_t>(&value_)) return *v;
    throw ProtocolError("SQL value is " + std::string(to_string(type())) + ", not int64");
}

double SqlValue::as_double() const {
    if (const auto* v = std::get_if<double>(&value_)) return *v;
    throw ProtocolError("SQL value is " + std::string(to_string(type())) + ", not double");
}

const std::string& SqlValue::as_string() const {
    if (const auto* v = std::get_if<std::string>(&value_)) return *v;
    throw ProtocolError("SQL value is " + std::string(to_string(type())) + ", not string");
}

std::string SqlValue::describe() const {
    switch (type()) {
        case Type::Null:
            return "NULL";
        case Type::Int64:
            return std::to_string(std::get<std::int64_t>(value_));
        case Type::Double: {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%.17g", std::get<double>(value_));
            return buf;
        }
        case Type::String:
            break;
    }
    constexpr std::size_t kMaxShown = 64;
    const std::string& s = std::get<std::string>(value_);
    std::string out = "'";
    for (std::size_t i = 0; i < s.size() && i < kMaxShown; ++i) {
        auto c = static_cast<unsigned char>(s[i]);
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
            out.push_back(static_cast<char>(c));
        } else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        }
    }
    out += "'";
    if (s.size() > kMaxShown) out += "... (" + std::to_string(s.size()) + " bytes)";
    return out;
}

}  // namespace lockstep
