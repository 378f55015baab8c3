// The binlog's column type codes (MYSQL_TYPE_* in MariaDB's include/mysql_com.h), only those the
// decoder reads, and the few facts about them the table map and row decoders share.
#pragma once

#include <cstdint>

namespace lockstep::binlog {

namespace ColumnCode {
inline constexpr std::uint8_t Tiny = 1;
inline constexpr std::uint8_t Short = 2;
inline constexpr std::uint8_t Long = 3;
inline constexpr std::uint8_t Float = 4;
inline constexpr std::uint8_t Double = 5;
inline constexpr std::uint8_t Timestamp = 7;
inline constexpr std::uint8_t LongLong = 8;
inline constexpr std::uint8_t Int24 = 9;
inline constexpr std::uint8_t Date = 10;
inline constexpr std::uint8_t Time = 11;
inline constexpr std::uint8_t Datetime = 12;
inline constexpr std::uint8_t Year = 13;
inline constexpr std::uint8_t NewDate = 14;
inline constexpr std::uint8_t Varchar = 15;
inline constexpr std::uint8_t Bit = 16;
inline constexpr std::uint8_t Timestamp2 = 17;
inline constexpr std::uint8_t Datetime2 = 18;
inline constexpr std::uint8_t Time2 = 19;
inline constexpr std::uint8_t NewDecimal = 246;
inline constexpr std::uint8_t Enum = 247;
inline constexpr std::uint8_t Set = 248;
inline constexpr std::uint8_t Blob = 252;
inline constexpr std::uint8_t VarString = 253;
inline constexpr std::uint8_t String = 254;
inline constexpr std::uint8_t Geometry = 255;
}  // namespace ColumnCode

// Numeric columns, in the sense of the SIGNEDNESS metadata (one bit each).
inline bool is_numeric(std::uint8_t type) noexcept {
    switch (type) {
        case ColumnCode::Tiny:
        case ColumnCode::Short:
        case ColumnCode::Int24:
        case ColumnCode::Long:
        case ColumnCode::LongLong:
        case ColumnCode::Float:
        case ColumnCode::Double:
        case ColumnCode::NewDecimal:
            return true;
        default:
            return false;
    }
}

// A type-254 column's metadata packs its real type (STRING, ENUM or SET) with two high bits of
// its length: meta = byte0 << 8 | byte1. When byte0's 0x30 bits are not both set, they carry
// length bits 8-9 (inverted) and the real type is byte0 | 0x30.
inline std::uint8_t string_real_type(std::uint16_t meta) noexcept {
    auto byte0 = static_cast<std::uint8_t>(meta >> 8);
    return (byte0 & 0x30) != 0x30 ? static_cast<std::uint8_t>(byte0 | 0x30) : byte0;
}
inline std::uint32_t string_max_length(std::uint16_t meta) noexcept {
    auto byte0 = static_cast<std::uint8_t>(meta >> 8);
    std::uint32_t byte1 = meta & 0xFF;
    if ((byte0 & 0x30) != 0x30) return byte1 | ((static_cast<std::uint32_t>((byte0 & 0x30) ^ 0x30)) << 4);
    return byte1;
}

}  // namespace lockstep::binlog
