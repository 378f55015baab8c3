// Row images of WRITE/UPDATE/DELETE_ROWS events: the column bitmaps, the null bitmap of each
// image, and one decoder per column type. Every length comes from the table map or the event and
// is checked by ByteReader before it is used.
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "byte_reader.h"
#include "column_types.h"
#include "lockstep/invalidation/binlog_event.h"

namespace lockstep::binlog {

namespace {

Value int_value(std::int64_t i) {
    Value v;
    v.kind = Value::Kind::Int;
    v.i = i;
    return v;
}
Value uint_value(std::uint64_t u) {
    Value v;
    v.kind = Value::Kind::UInt;
    v.u = u;
    return v;
}
Value text_value(std::string s, Value::Kind kind = Value::Kind::Text) {
    Value v;
    v.kind = kind;
    v.s = std::move(s);
    return v;
}

// An integer of `n` bytes, sign-extended unless the column is unsigned.
Value integer(ByteReader& r, std::size_t n, bool is_unsigned) {
    std::uint64_t raw = r.le(n, "integer column");
    if (is_unsigned) return uint_value(raw);
    const unsigned shift = static_cast<unsigned>(64 - 8 * n);
    return int_value(static_cast<std::int64_t>(raw << shift) >> shift);
}

Value length_prefixed(ByteReader& r, std::size_t prefix_bytes) {
    auto n = static_cast<std::size_t>(r.le(prefix_bytes, "string length"));
    return text_value(r.string(n, "string column"), Value::Kind::Bytes);
}

std::string two(unsigned v) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "%02u", v % 100);
    return buf;
}

// Fractional seconds of the *2 temporal formats: (fsp + 1) / 2 big-endian bytes, rendered with
// exactly fsp digits.
std::string fraction(std::uint64_t usec, unsigned fsp) {
    if (fsp == 0) return "";
    char buf[16];
    std::snprintf(buf, sizeof buf, "%06" PRIu64, usec % 1000000);
    return "." + std::string(buf, fsp);
}
unsigned checked_fsp(std::uint16_t meta) {
    if (meta > 6) throw BinlogDecodeError("binlog: fractional-seconds precision " + std::to_string(meta) + " > 6");
    return meta;
}
std::uint64_t unsigned_fraction_usec(ByteReader& r, unsigned fsp) {
    switch ((fsp + 1) / 2) {
        case 0: return 0;
        case 1: return r.be(1, "fractional seconds") * 10000;
        case 2: return r.be(2, "fractional seconds") * 100;
        default: return r.be(3, "fractional seconds");
    }
}

std::string date_text(unsigned year, unsigned month, unsigned day) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%04u-%02u-%02u", year % 10000, month % 100, day % 100);
    return buf;
}

Value datetime2(ByteReader& r, unsigned fsp) {
    std::int64_t packed = static_cast<std::int64_t>(r.be(5, "datetime")) - 0x8000000000LL;
    std::uint64_t usec = unsigned_fraction_usec(r, fsp);
    if (packed < 0) throw BinlogDecodeError("binlog: negative DATETIME");
    std::uint64_t ymd = static_cast<std::uint64_t>(packed) >> 17, hms = static_cast<std::uint64_t>(packed) % (1 << 17);
    std::uint64_t ym = ymd >> 5;
    return text_value(date_text(static_cast<unsigned>(ym / 13), ym % 13, ymd % 32) + " " + two(hms >> 12) + ":" +
                      two((hms >> 6) % 64) + ":" + two(hms % 64) + fraction(usec, fsp));
}

Value timestamp2(ByteReader& r, unsigned fsp) {
    std::uint64_t seconds = r.be(4, "timestamp");
    std::uint64_t usec = unsigned_fraction_usec(r, fsp);
    return text_value(std::to_string(seconds) + fraction(usec, fsp));
}

// TIME(fsp): 3 bytes of hh:mm:ss offset by 0x800000, then a fraction that is signed for
// negative times (MariaDB's my_time_packed_from_binary).
Value time2(ByteReader& r, unsigned fsp) {
    std::int64_t packed = 0;
    switch ((fsp + 1) / 2) {
        case 0:
            packed = (static_cast<std::int64_t>(r.be(3, "time")) - 0x800000) * (1LL << 24);
            break;
        case 1: {
            std::int64_t intpart = static_cast<std::int64_t>(r.be(3, "time")) - 0x800000;
            std::int64_t frac = static_cast<std::int8_t>(r.u8("time fraction"));
            if (intpart < 0 && frac != 0) {
                intpart++;
                frac -= 0x100;
            }
            packed = intpart * (1LL << 24) + frac * 10000;
            break;
        }
        case 2: {
            std::int64_t intpart = static_cast<std::int64_t>(r.be(3, "time")) - 0x800000;
            std::int64_t frac = static_cast<std::int64_t>(r.be(2, "time fraction"));
            if (intpart < 0 && frac != 0) {
                intpart++;
                frac -= 0x10000;
            }
            packed = intpart * (1LL << 24) + frac * 100;
            break;
        }
        default:
            packed = static_cast<std::int64_t>(r.be(6, "time")) - 0x800000000000LL;
            break;
    }
    bool negative = packed < 0;
    std::uint64_t magnitude = negative ? static_cast<std::uint64_t>(-packed) : static_cast<std::uint64_t>(packed);
    std::uint64_t hms = magnitude >> 24, usec = magnitude % (1 << 24);
    std::string hours = std::to_string((hms >> 12) % (1 << 10));
    if (hours.size() < 2) hours = "0" + hours;
    return text_value((negative ? "-" : "") + hours + ":" + two((hms >> 6) % 64) + ":" + two(hms % 64) + fraction(usec, fsp));
}

// DECIMAL(p, s): groups of 9 digits in 4 bytes, a partial group at each end; the sign is the
// inverted top bit, and a negative number has every byte inverted.
Value decimal(ByteReader& r, std::uint16_t meta) {
    static constexpr unsigned kDigitBytes[10] = {0, 1, 1, 2, 2, 3, 3, 4, 4, 4};
    static constexpr std::uint32_t kPow10[10] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000};
    unsigned precision = meta >> 8, scale = meta & 0xFF;
    if (precision == 0 || precision > 65 || scale > 38 || scale > precision) {
        throw BinlogDecodeError("binlog: bad DECIMAL(" + std::to_string(precision) + "," + std::to_string(scale) + ")");
    }
    unsigned intg = precision - scale;
    unsigned intg0 = intg / 9, intg0x = intg % 9, frac0 = scale / 9, frac0x = scale % 9;
    std::size_t size = intg0 * 4 + kDigitBytes[intg0x] + frac0 * 4 + kDigitBytes[frac0x];
    auto raw = r.take(size, "decimal column");
    std::uint8_t bytes[64];
    std::memcpy(bytes, raw.data(), size);
    bool negative = (bytes[0] & 0x80) == 0;
    bytes[0] ^= 0x80;
    if (negative) {
        for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::uint8_t>(~bytes[i]);
    }
    ByteReader d(std::span<const std::uint8_t>(bytes, size));
    auto group = [&](unsigned digits) -> std::string {
        std::uint64_t v = d.be(digits == 9 ? 4 : kDigitBytes[digits], "decimal digits");
        if (v >= kPow10[digits] && digits < 10) throw BinlogDecodeError("binlog: DECIMAL digit group out of range");
        char buf[16];
        std::snprintf(buf, sizeof buf, "%0*" PRIu64, static_cast<int>(digits), v);
        return buf;
    };
    std::string integer_part, fraction_part;
    if (intg0x) integer_part += group(intg0x);
    for (unsigned i = 0; i < intg0; ++i) integer_part += group(9);
    for (unsigned i = 0; i < frac0; ++i) fraction_part += group(9);
    if (frac0x) fraction_part += group(frac0x);
    std::size_t first = integer_part.find_first_not_of('0');
    integer_part = first == std::string::npos ? "0" : integer_part.substr(first);
    bool zero = integer_part == "0" && fraction_part.find_first_not_of('0') == std::string::npos;
    std::string text = (negative && !zero ? "-" : "") + integer_part;
    if (!fraction_part.empty()) text += "." + fraction_part;
    return text_value(std::move(text));
}

Value column_value(ByteReader& r, const Column& c) {
    switch (c.real_type) {
        case ColumnCode::Tiny: return integer(r, 1, c.is_unsigned);
        case ColumnCode::Short: return integer(r, 2, c.is_unsigned);
        case ColumnCode::Int24: return integer(r, 3, c.is_unsigned);
        case ColumnCode::Long: return integer(r, 4, c.is_unsigned);
        case ColumnCode::LongLong: return integer(r, 8, c.is_unsigned);
        case ColumnCode::Year: {
            std::uint8_t y = r.u8("year column");
            return int_value(y == 0 ? 0 : 1900 + y);
        }
        case ColumnCode::Float: {
            auto bits = static_cast<std::uint32_t>(r.le(4, "float column"));
            float f;
            std::memcpy(&f, &bits, 4);
            Value v;
            v.kind = Value::Kind::Double;
            v.d = f;
            return v;
        }
        case ColumnCode::Double: {
            std::uint64_t bits = r.le(8, "double column");
            Value v;
            v.kind = Value::Kind::Double;
            std::memcpy(&v.d, &bits, 8);
            return v;
        }
        case ColumnCode::NewDecimal: return decimal(r, c.meta);
        case ColumnCode::Varchar:
        case ColumnCode::VarString: return length_prefixed(r, c.meta < 256 ? 1 : 2);
        case ColumnCode::String: return length_prefixed(r, string_max_length(c.meta) < 256 ? 1 : 2);
        case ColumnCode::Enum:
        case ColumnCode::Set: {
            std::size_t pack = c.meta & 0xFF;
            if (pack == 0 || pack > 8 || (c.real_type == ColumnCode::Enum && pack > 2)) {
                throw BinlogDecodeError("binlog: bad ENUM/SET pack length " + std::to_string(pack));
            }
            return uint_value(r.le(pack, "enum/set column"));
        }
        case ColumnCode::Blob:
        case ColumnCode::Geometry: {
            if (c.meta == 0 || c.meta > 4) throw BinlogDecodeError("binlog: bad BLOB length size " + std::to_string(c.meta));
            return length_prefixed(r, c.meta);
        }
        case ColumnCode::Bit: {
            std::size_t n = (c.meta & 0xFF) + ((c.meta >> 8) ? 1 : 0);
            if (n > 8) throw BinlogDecodeError("binlog: BIT wider than 64");
            return uint_value(n ? r.be(n, "bit column") : 0);
        }
        case ColumnCode::Date:
        case ColumnCode::NewDate: {
            auto v = static_cast<unsigned>(r.le(3, "date column"));
            return text_value(date_text(v >> 9, (v >> 5) & 15, v & 31));
        }
        case ColumnCode::Time: {
            auto raw = static_cast<std::int32_t>(r.le(3, "time column") << 8) >> 8;
            unsigned m = static_cast<unsigned>(raw < 0 ? -raw : raw);
            return text_value((raw < 0 ? "-" : "") + two(m / 10000) + ":" + two(m / 100 % 100) + ":" + two(m % 100));
        }
        case ColumnCode::Datetime: {
            std::uint64_t v = r.le(8, "datetime column");
            std::uint64_t date = v / 1000000, time = v % 1000000;
            return text_value(date_text(static_cast<unsigned>(date / 10000), date / 100 % 100, date % 100) + " " +
                              two(static_cast<unsigned>(time / 10000)) + ":" + two(time / 100 % 100) + ":" + two(time % 100));
        }
        case ColumnCode::Timestamp: return int_value(static_cast<std::int64_t>(r.le(4, "timestamp column")));
        case ColumnCode::Timestamp2: return timestamp2(r, checked_fsp(c.meta));
        case ColumnCode::Datetime2: return datetime2(r, checked_fsp(c.meta));
        case ColumnCode::Time2: return time2(r, checked_fsp(c.meta));
        default:
            // decode_table_map refuses these; a hand-built TableMap could still carry one.
            throw UnsupportedColumnError("?", c.name, c.type);
    }
}

std::size_t bits_set(Bytes bitmap, std::size_t count) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < count; ++i) n += (bitmap[i / 8] >> (i % 8)) & 1;
    return n;
}

// One image: a null bitmap over the present columns, then the non-null present values.
RowImage read_image(ByteReader& r, const TableMap& map, Bytes present) {
    std::size_t columns = map.columns.size();
    auto nulls = r.take((bits_set(present, columns) + 7) / 8, "row null bitmap");
    RowImage image(columns);
    std::size_t k = 0;  // index among present columns
    for (std::size_t i = 0; i < columns; ++i) {
        if (!((present[i / 8] >> (i % 8)) & 1)) continue;
        if ((nulls[k / 8] >> (k % 8)) & 1) {
            image[i].kind = Value::Kind::Null;
        } else {
            image[i] = column_value(r, map.columns[i]);
        }
        ++k;
    }
    return image;
}

}  // namespace

std::uint64_t rows_event_table_id(Bytes event) {
    ByteReader r(event);
    r.skip(kHeaderSize, "header");
    return r.le(6, "table id");
}

RowsEvent decode_rows(Bytes event, const TableMap& map) {
    EventHeader h = decode_header(event);
    if (!is_rows_event(h.type)) {
        throw BinlogDecodeError("binlog: event type " + std::to_string(h.type) + " is not a rows event");
    }
    bool v2 = h.type >= EventType::WriteRowsV2;
    std::uint8_t base = v2 ? EventType::WriteRowsV2 : EventType::WriteRowsV1;
    RowsEvent out;
    out.kind = static_cast<RowsEvent::Kind>(h.type - base);
    ByteReader r(event);
    r.skip(kHeaderSize, "header");
    out.table_id = r.le(6, "table id");
    out.end_of_statement = r.le(2, "rows flags") & 0x0001;
    if (out.table_id != map.table_id) {
        throw BinlogDecodeError("binlog: rows event for table id " + std::to_string(out.table_id) +
                                " decoded with the map of table id " + std::to_string(map.table_id));
    }
    if (v2) {
        std::size_t extra = r.le(2, "rows extra data length");
        if (extra < 2) throw BinlogDecodeError("binlog: bad rows extra data length");
        r.skip(extra - 2, "rows extra data");
    }
    std::uint64_t count = r.lenenc("rows column count");
    if (count != map.columns.size()) {
        throw BinlogDecodeError("binlog: rows event has " + std::to_string(count) + " columns, table map of " + map.table +
                                " has " + std::to_string(map.columns.size()));
    }
    std::size_t bitmap_size = (map.columns.size() + 7) / 8;
    Bytes present = r.take(bitmap_size, "columns bitmap");
    Bytes present_after = out.kind == RowsEvent::Kind::Update ? r.take(bitmap_size, "columns-after bitmap") : present;
    while (!r.at_end()) {
        RowChange change;
        std::size_t before = r.position();
        switch (out.kind) {
            case RowsEvent::Kind::Write: change.after = read_image(r, map, present); break;
            case RowsEvent::Kind::Delete: change.before = read_image(r, map, present); break;
            case RowsEvent::Kind::Update:
                change.before = read_image(r, map, present);
                change.after = read_image(r, map, present_after);
                break;
        }
        // An image of zero bytes (no columns present) would loop forever on the same position.
        if (r.position() == before) throw BinlogDecodeError("binlog: empty row image");
        out.rows.push_back(std::move(change));
    }
    return out;
}

std::optional<std::int64_t> Value::as_int64() const noexcept {
    if (kind == Kind::Int) return i;
    if (kind == Kind::UInt && u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return static_cast<std::int64_t>(u);
    }
    return std::nullopt;
}

std::string Value::to_string() const {
    switch (kind) {
        case Kind::Absent: return "(absent)";
        case Kind::Null: return "NULL";
        case Kind::Int: return std::to_string(i);
        case Kind::UInt: return std::to_string(u);
        case Kind::Double: {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%g", d);
            return buf;
        }
        case Kind::Text: return s;
        case Kind::Bytes: {
            std::string out = "'";
            for (unsigned char ch : s) {
                if (ch >= 0x20 && ch < 0x7F && ch != '\'' && ch != '\\') {
                    out += static_cast<char>(ch);
                } else {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\x%02x", ch);
                    out += buf;
                }
            }
            return out + "'";
        }
    }
    return "?";
}

}  // namespace lockstep::binlog
