// The binlog decoder: pure functions from the bytes of one MariaDB binary-log event to values.
//
//   auto bytes = strip_checksum(event_bytes, /*has_crc32=*/true);   // verifies the CRC32
//   EventHeader h = decode_header(bytes);
//   if (h.type == EventType::TableMap) map = decode_table_map(bytes);
//   if (is_rows_event(h.type))         RowsEvent rows = decode_rows(bytes, map);
//
// What it reads: the 19-byte v4 header; TABLE_MAP (column types, metadata, and the optional
// metadata of --binlog-row-metadata=FULL: column names, signedness, primary key); WRITE/UPDATE/
// DELETE_ROWS v1 and v2 with any column bitmaps (FULL or MINIMAL images); MariaDB GTID, XID and
// QUERY events (the follower needs their boundaries and, for QUERY, the statement text).
//
// Column types read: TINYINT..BIGINT signed and unsigned, YEAR, FLOAT, DOUBLE, DECIMAL, BIT,
// CHAR/VARCHAR/BINARY/VARBINARY (and MariaDB's UUID/INET6, which travel as BINARY), TEXT/BLOB
// (and JSON, a LONGTEXT in MariaDB), ENUM, SET, DATE, TIME, DATETIME, TIMESTAMP (old and
// fractional formats), GEOMETRY (as bytes). Anything else is an UnsupportedColumnError when the
// table map is decoded; compressed row events are a BinlogDecodeError.
//
// Why our own decoder: libmariadb's mariadb_rpl_extract_rows mis-decodes integer-only tables,
// CHAR, ENUM, BINARY, UUID and DATE columns and MINIMAL images without an error (checked
// 2026-11-23). A wrong key here is a silently lost invalidation (C5, C9), so every length is
// checked against the event and every malformed input is a typed error; the decoder is fuzzed
// (tests/fuzz/fuzz_binlog_rows.cpp).
//
// Thread safety: pure functions over their arguments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/invalidation/binlog_errors.h"

namespace lockstep::binlog {

using Bytes = std::span<const std::uint8_t>;

// The event types the follower acts on (MariaDB's sql/log_event.h numbering).
namespace EventType {
inline constexpr std::uint8_t Query = 2;
inline constexpr std::uint8_t Rotate = 4;
inline constexpr std::uint8_t FormatDescription = 15;
inline constexpr std::uint8_t Xid = 16;
inline constexpr std::uint8_t TableMap = 19;
inline constexpr std::uint8_t WriteRowsV1 = 23;
inline constexpr std::uint8_t UpdateRowsV1 = 24;
inline constexpr std::uint8_t DeleteRowsV1 = 25;
inline constexpr std::uint8_t Heartbeat = 27;
inline constexpr std::uint8_t WriteRowsV2 = 30;
inline constexpr std::uint8_t UpdateRowsV2 = 31;
inline constexpr std::uint8_t DeleteRowsV2 = 32;
inline constexpr std::uint8_t AnnotateRows = 160;
inline constexpr std::uint8_t BinlogCheckpoint = 161;
inline constexpr std::uint8_t Gtid = 162;
inline constexpr std::uint8_t GtidList = 163;
// MariaDB's compressed events (log_bin_compress): refused.
inline constexpr std::uint8_t QueryCompressed = 165;
inline constexpr std::uint8_t WriteRowsCompressedV1 = 169;
inline constexpr std::uint8_t DeleteRowsCompressedV1 = 171;
}  // namespace EventType

bool is_rows_event(std::uint8_t type) noexcept;
bool is_compressed_event(std::uint8_t type) noexcept;

inline constexpr std::size_t kHeaderSize = 19;

struct EventHeader {
    std::uint32_t timestamp = 0;  // seconds since the epoch, when the statement started
    std::uint8_t type = 0;
    std::uint32_t server_id = 0;
    std::uint32_t event_size = 0;  // header + body (+ checksum, as the server counted it)
    std::uint32_t next_position = 0;
    std::uint16_t flags = 0;
};

// CRC32 (zlib's polynomial), as MariaDB's binlog_checksum=CRC32 computes it.
std::uint32_t crc32(Bytes bytes) noexcept;

// The event without its trailing 4-byte checksum, which is verified (BinlogDecodeError on a
// mismatch or a too-short event). With has_crc32 = false, returns `event` unchanged.
Bytes strip_checksum(Bytes event, bool has_crc32);

// REQUIRES for every decode_*: `event` is header + body, checksum already stripped.
EventHeader decode_header(Bytes event);

// One column of a table map.
struct Column {
    std::uint8_t type = 0;       // the binlog type code (MYSQL_TYPE_*)
    std::uint8_t real_type = 0;  // for type 254: STRING, ENUM (247) or SET (248); else = type
    std::uint16_t meta = 0;      // the type's metadata (length, precision/scale, fsp ...)
    bool is_unsigned = false;    // from the SIGNEDNESS metadata (false when absent)
    bool nullable = true;
    std::string name;            // from COLUMN_NAME metadata ("" when absent)
};

struct TableMap {
    std::uint64_t table_id = 0;
    std::string database;
    std::string table;
    std::vector<Column> columns;
    // Column indexes of the primary key (SIMPLE_PRIMARY_KEY or PRIMARY_KEY_WITH_PREFIX
    // metadata); empty when the server sent none.
    std::vector<std::size_t> primary_key;

    // Index of the column named `name` (case-insensitive), if the map carries names.
    std::optional<std::size_t> column_index(std::string_view name) const;
};

TableMap decode_table_map(Bytes event);

// Only the table id and names of a TABLE_MAP: enough to decide whether to decode the rest (a
// table nobody watches may have columns the decoder refuses).
struct TableName {
    std::uint64_t table_id = 0;
    std::string database;
    std::string table;
};
TableName decode_table_name(Bytes event);

// One decoded column value.
struct Value {
    enum class Kind : std::uint8_t { Absent, Null, Int, UInt, Double, Bytes, Text };
    Kind kind = Kind::Absent;  // Absent: the image did not include the column (MINIMAL images)
    std::int64_t i = 0;        // Int (also YEAR, TIMESTAMP seconds)
    std::uint64_t u = 0;       // UInt (unsigned integers, ENUM index, SET bits, BIT)
    double d = 0;              // Double
    std::string s;             // Bytes (strings, blobs, as stored); Text (DECIMAL, DATE, TIME, DATETIME)

    // The value as an int64 key: Int, or UInt within range. std::nullopt otherwise.
    std::optional<std::int64_t> as_int64() const noexcept;
    // A readable rendering (for logs and tests): NULL, 42, 'bytes', 2024-05-06 ...
    std::string to_string() const;
};

using RowImage = std::vector<Value>;  // one Value per table column, in column order

struct RowChange {
    RowImage before;  // UPDATE, DELETE
    RowImage after;   // WRITE, UPDATE
};

struct RowsEvent {
    enum class Kind : std::uint8_t { Write, Update, Delete };
    Kind kind = Kind::Write;
    std::uint64_t table_id = 0;
    bool end_of_statement = false;
    std::vector<RowChange> rows;
};

// The table id a rows event refers to (to find its table map). Cheap: reads the post-header.
std::uint64_t rows_event_table_id(Bytes event);

// REQUIRES: `map` is the table map with the event's table id (ProtocolError otherwise).
RowsEvent decode_rows(Bytes event, const TableMap& map);

// MariaDB GTID event: domain-server-sequence, and whether a COMMIT/XID ends its group.
struct Gtid {
    std::uint32_t domain = 0;
    std::uint32_t server_id = 0;
    std::uint64_t sequence = 0;
    bool standalone = false;  // FL_STANDALONE: one statement, no XID/COMMIT follows (DDL)
    std::string to_string() const;  // "0-1-42"
};
Gtid decode_gtid(Bytes event);

struct QueryEvent {
    std::string database;
    std::string query;
};
QueryEvent decode_query(Bytes event);

}  // namespace lockstep::binlog
