// Event framing: header, checksum, TABLE_MAP (with the optional metadata of
// binlog_row_metadata=FULL), GTID and QUERY events. Row images are in row_image.cpp.
#include "lockstep/invalidation/binlog_event.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "byte_reader.h"
#include "column_types.h"

namespace lockstep::binlog {

bool is_rows_event(std::uint8_t type) noexcept {
    return (type >= EventType::WriteRowsV1 && type <= EventType::DeleteRowsV1) ||
           (type >= EventType::WriteRowsV2 && type <= EventType::DeleteRowsV2);
}

bool is_compressed_event(std::uint8_t type) noexcept {
    // QUERY_COMPRESSED (165) and the six compressed rows events (166..171).
    return type >= EventType::QueryCompressed && type <= EventType::DeleteRowsCompressedV1;
}

std::uint32_t crc32(Bytes bytes) noexcept {
    static const auto table = [] {
        std::array<std::uint32_t, 256> t{};
        for (std::uint32_t i = 0; i < 256; ++i) {
            std::uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            t[i] = c;
        }
        return t;
    }();
    std::uint32_t c = 0xFFFFFFFFu;
    for (std::uint8_t b : bytes) c = table[(c ^ b) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

Bytes strip_checksum(Bytes event, bool has_crc32) {
    if (!has_crc32) return event;
    if (event.size() < kHeaderSize + 4) throw BinlogDecodeError("binlog: event shorter than header + checksum");
    Bytes body = event.first(event.size() - 4);
    ByteReader tail(event.last(4));
    auto expected = static_cast<std::uint32_t>(tail.le(4, "checksum"));
    if (crc32(body) != expected) throw BinlogDecodeError("binlog: event checksum mismatch");
    return body;
}

EventHeader decode_header(Bytes event) {
    ByteReader r(event);
    EventHeader h;
    h.timestamp = static_cast<std::uint32_t>(r.le(4, "header timestamp"));
    h.type = r.u8("header type");
    h.server_id = static_cast<std::uint32_t>(r.le(4, "header server id"));
    h.event_size = static_cast<std::uint32_t>(r.le(4, "header event size"));
    h.next_position = static_cast<std::uint32_t>(r.le(4, "header next position"));
    h.flags = static_cast<std::uint16_t>(r.le(2, "header flags"));
    return h;
}

namespace {

// The type's metadata from the table map's metadata block (how many bytes depends on the type).
void read_column_metadata(ByteReader& meta, Column& c, const std::string& table, std::size_t index) {
    switch (c.type) {
        case ColumnCode::Float:
        case ColumnCode::Double:
        case ColumnCode::Blob:
        case ColumnCode::Geometry:
        case ColumnCode::Timestamp2:
        case ColumnCode::Datetime2:
        case ColumnCode::Time2:
            c.meta = meta.u8("column metadata");
            break;
        case ColumnCode::Varchar:
        case ColumnCode::VarString:
            c.meta = static_cast<std::uint16_t>(meta.le(2, "column metadata"));
            break;
        case ColumnCode::Bit:
        case ColumnCode::NewDecimal:
        case ColumnCode::String:
        case ColumnCode::Enum:
        case ColumnCode::Set: {
            std::uint16_t hi = meta.u8("column metadata");
            c.meta = static_cast<std::uint16_t>((hi << 8) | meta.u8("column metadata"));
            break;
        }
        case ColumnCode::Tiny:
        case ColumnCode::Short:
        case ColumnCode::Int24:
        case ColumnCode::Long:
        case ColumnCode::LongLong:
        case ColumnCode::Year:
        case ColumnCode::Date:
        case ColumnCode::NewDate:
        case ColumnCode::Time:
        case ColumnCode::Datetime:
        case ColumnCode::Timestamp:
            break;
        default:
            throw UnsupportedColumnError(table, c.name.empty() ? "#" + std::to_string(index) : c.name, c.type);
    }
    c.real_type = c.type;
    if (c.type == ColumnCode::String) c.real_type = string_real_type(c.meta);
}

// SIGNEDNESS: one bit per numeric column, most significant bit first.
void apply_signedness(Bytes bits, std::vector<Column>& columns) {
    std::size_t n = 0;
    for (auto& c : columns) {
        if (!is_numeric(c.type)) continue;
        std::size_t byte = n / 8;
        if (byte >= bits.size()) break;
        c.is_unsigned = (bits[byte] >> (7 - n % 8)) & 1;
        ++n;
    }
}

void read_optional_metadata(ByteReader& r, TableMap& map) {
    std::vector<std::string> names;
    while (!r.at_end()) {
        std::uint8_t kind = r.u8("optional metadata type");
        std::size_t length = r.count(r.lenenc("optional metadata length"), 1, "optional metadata");
        ByteReader field(r.take(length, "optional metadata field"));
        switch (kind) {
            case 1:  // SIGNEDNESS
                apply_signedness(field.take(field.left(), "signedness"), map.columns);
                break;
            case 4:  // COLUMN_NAME
                while (!field.at_end()) {
                    std::size_t n = field.count(field.lenenc("column name length"), 1, "column name");
                    names.push_back(field.string(n, "column name"));
                }
                break;
            case 8:  // SIMPLE_PRIMARY_KEY: column indexes
                while (!field.at_end()) map.primary_key.push_back(field.lenenc("primary key column"));
                break;
            case 9:  // PRIMARY_KEY_WITH_PREFIX: (index, prefix length) pairs
                while (!field.at_end()) {
                    map.primary_key.push_back(field.lenenc("primary key column"));
                    field.lenenc("primary key prefix");
                }
                break;
            default:  // charsets, enum/set strings, geometry types: not needed for keys
                break;
        }
    }
    for (std::size_t i = 0; i < names.size() && i < map.columns.size(); ++i) map.columns[i].name = std::move(names[i]);
    for (std::size_t k : map.primary_key) {
        if (k >= map.columns.size()) throw BinlogDecodeError("binlog: primary key column index out of range in " + map.table);
    }
}

}  // namespace

TableMap decode_table_map(Bytes event) {
    ByteReader r(event);
    r.skip(kHeaderSize, "header");
    TableMap map;
    map.table_id = r.le(6, "table id");
    r.skip(2, "table map flags");
    map.database = r.string(r.u8("database name length"), "database name");
    r.skip(1, "database name terminator");
    map.table = r.string(r.u8("table name length"), "table name");
    r.skip(1, "table name terminator");
    std::size_t count = r.count(r.lenenc("column count"), 1, "column count");
    auto types = r.take(count, "column types");
    map.columns.resize(count);
    for (std::size_t i = 0; i < count; ++i) map.columns[i].type = types[i];
    std::size_t meta_length = r.count(r.lenenc("metadata length"), 1, "metadata");
    ByteReader meta(r.take(meta_length, "column metadata block"));
    auto nulls = r.take((count + 7) / 8, "null bitmap");
    for (std::size_t i = 0; i < count; ++i) map.columns[i].nullable = (nulls[i / 8] >> (i % 8)) & 1;
    // Names come after the metadata block; decode them first so an unsupported column is named.
    read_optional_metadata(r, map);
    for (std::size_t i = 0; i < count; ++i) read_column_metadata(meta, map.columns[i], map.table, i);
    return map;
}

TableName decode_table_name(Bytes event) {
    ByteReader r(event);
    r.skip(kHeaderSize, "header");
    TableName name;
    name.table_id = r.le(6, "table id");
    r.skip(2, "table map flags");
    name.database = r.string(r.u8("database name length"), "database name");
    r.skip(1, "database name terminator");
    name.table = r.string(r.u8("table name length"), "table name");
    return name;
}

std::optional<std::size_t> TableMap::column_index(std::string_view name) const {
    auto same = [](std::string_view a, std::string_view b) {
        return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
            return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
        });
    };
    for (std::size_t i = 0; i < columns.size(); ++i) {
        if (same(columns[i].name, name)) return i;
    }
    return std::nullopt;
}

Gtid decode_gtid(Bytes event) {
    EventHeader h = decode_header(event);
    ByteReader r(event);
    r.skip(kHeaderSize, "header");
    Gtid g;
    g.server_id = h.server_id;
    g.sequence = r.le(8, "gtid sequence");
    g.domain = static_cast<std::uint32_t>(r.le(4, "gtid domain"));
    g.standalone = r.u8("gtid flags") & 0x01;
    return g;
}

std::string Gtid::to_string() const {
    return std::to_string(domain) + "-" + std::to_string(server_id) + "-" + std::to_string(sequence);
}

QueryEvent decode_query(Bytes event) {
    ByteReader r(event);
    r.skip(kHeaderSize, "header");
    r.skip(8, "query thread id and exec time");
    std::size_t db_length = r.u8("query database length");
    r.skip(2, "query error code");
    std::size_t status_length = r.le(2, "query status length");
    r.skip(status_length, "query status variables");
    QueryEvent q;
    q.database = r.string(db_length, "query database");
    r.skip(1, "query database terminator");
    q.query = r.string(r.left(), "query text");
    return q;
}

}  // namespace lockstep::binlog
