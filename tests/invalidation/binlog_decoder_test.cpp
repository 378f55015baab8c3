// The row-image decoder over real captured events (captured_events.h) and hand-built ones.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "captured_events.h"
#include "lockstep/invalidation/binlog_event.h"

namespace lockstep::binlog {
namespace {

Bytes stripped(const std::vector<std::uint8_t>& event) { return strip_checksum(event, true); }

// A hand-built event: a 19-byte header of `type` and then `body`, no checksum.
class EventBuilder {
public:
    explicit EventBuilder(std::uint8_t type) { bytes_.assign(kHeaderSize, 0); bytes_[4] = type; }
    EventBuilder& u8(std::uint8_t v) { bytes_.push_back(v); return *this; }
    EventBuilder& le(std::uint64_t v, int n) {
        for (int i = 0; i < n; ++i) bytes_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
        return *this;
    }
    EventBuilder& be(std::uint64_t v, int n) {
        for (int i = n - 1; i >= 0; --i) bytes_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
        return *this;
    }
    EventBuilder& str(std::string_view s) { bytes_.insert(bytes_.end(), s.begin(), s.end()); return *this; }
    std::vector<std::uint8_t> build() {
        auto out = bytes_;
        auto size = static_cast<std::uint32_t>(out.size());
        for (int i = 0; i < 4; ++i) out[9 + i] = static_cast<std::uint8_t>(size >> (8 * i));
        return out;
    }

private:
    std::vector<std::uint8_t> bytes_;
};

// TABLE_MAP for `t` with the given column types and metadata bytes, table id 7, with names.
std::vector<std::uint8_t> table_map(const std::vector<std::uint8_t>& types, const std::vector<std::uint8_t>& meta,
                                    const std::vector<std::string>& names, std::uint8_t signedness = 0) {
    EventBuilder b(EventType::TableMap);
    b.le(7, 6).le(0, 2).u8(2).str("db").u8(0).u8(1).str("t").u8(0);
    b.u8(static_cast<std::uint8_t>(types.size()));
    for (auto t : types) b.u8(t);
    b.u8(static_cast<std::uint8_t>(meta.size()));
    for (auto m : meta) b.u8(m);
    b.u8(0xFF);  // null bitmap (up to 8 columns)
    b.u8(1).u8(1).u8(signedness);
    std::string names_field;
    for (const auto& n : names) names_field += static_cast<char>(n.size()) + n;
    b.u8(4).u8(static_cast<std::uint8_t>(names_field.size())).str(names_field);
    b.u8(8).u8(1).u8(0);  // primary key: column 0
    return b.build();
}

TEST(BinlogDecoder, CapturedTableMapCarriesNamesSignednessAndPrimaryKey) {
    TableMap map = decode_table_map(stripped(captured::table_map));
    EXPECT_EQ(map.database, "t");
    EXPECT_EQ(map.table, "p");
    ASSERT_EQ(map.columns.size(), 19u);
    EXPECT_EQ(map.columns[0].name, "id");
    EXPECT_EQ(map.columns[18].name, "version");
    EXPECT_TRUE(map.columns[1].is_unsigned);   // a TINYINT UNSIGNED
    EXPECT_FALSE(map.columns[2].is_unsigned);  // b SMALLINT
    EXPECT_TRUE(map.columns[4].is_unsigned);   // d INT UNSIGNED
    ASSERT_EQ(map.primary_key, std::vector<std::size_t>{0});
    EXPECT_EQ(map.column_index("VERSION"), 18u);
}

TEST(BinlogDecoder, CapturedWriteRowsDecodesEveryColumnType) {
    TableMap map = decode_table_map(stripped(captured::table_map));
    RowsEvent ev = decode_rows(stripped(captured::write_rows), map);
    EXPECT_EQ(ev.kind, RowsEvent::Kind::Write);
    EXPECT_TRUE(ev.end_of_statement);
    ASSERT_EQ(ev.rows.size(), 1u);
    const RowImage& row = ev.rows[0].after;
    std::vector<std::string> expected = {
        // s is latin1 (the server's default charset): the bytes as stored.
    "42", "255", "-2", "-300000", "4000000000", "'h\\xe9llo'", "'ab'", "'long text'", "-1234.567",
        "2024-05-06 07:08:09.12", "", "2024-05-06", "2", "'abc'", "2024", "1.5", "-12:34:56.789", "", "1"};
    for (std::size_t i = 0; i < expected.size(); ++i) {
        if (expected[i].empty()) continue;  // checked below
        EXPECT_EQ(row[i].to_string(), expected[i]) << "column " << map.columns[i].name;
    }
    EXPECT_EQ(row[0].as_int64(), 42);
    EXPECT_EQ(row[10].kind, Value::Kind::Text);  // TIMESTAMP(2): seconds since the epoch (time zone free)
    EXPECT_NE(row[10].s.find(".50"), std::string::npos) << row[10].s;
    // UUID travels as BINARY(16); like every CHAR/BINARY value the server trims its trailing pad
    // bytes (this one ends in 0x00).
    ASSERT_EQ(row[17].kind, Value::Kind::Bytes);
    EXPECT_EQ(row[17].s.size(), 15u);
}

TEST(BinlogDecoder, CapturedUpdateHasBothImages) {
    TableMap map = decode_table_map(stripped(captured::table_map));
    map.table_id = rows_event_table_id(stripped(captured::update_rows));  // a later map, same table
    RowsEvent ev = decode_rows(stripped(captured::update_rows), map);
    EXPECT_EQ(ev.kind, RowsEvent::Kind::Update);
    ASSERT_EQ(ev.rows.size(), 1u);
    EXPECT_EQ(ev.rows[0].before[5].to_string(), "'h\\xe9llo'");
    EXPECT_EQ(ev.rows[0].after[5].to_string(), "'bye'");
    EXPECT_EQ(ev.rows[0].before[18].as_int64(), 1);
    EXPECT_EQ(ev.rows[0].after[18].as_int64(), 2);
}

TEST(BinlogDecoder, CapturedDeleteHasTheBeforeImage) {
    TableMap map = decode_table_map(stripped(captured::table_map));
    map.table_id = rows_event_table_id(stripped(captured::delete_rows));
    RowsEvent ev = decode_rows(stripped(captured::delete_rows), map);
    EXPECT_EQ(ev.kind, RowsEvent::Kind::Delete);
    ASSERT_EQ(ev.rows.size(), 1u);
    EXPECT_EQ(ev.rows[0].before[0].as_int64(), 42);
    EXPECT_TRUE(ev.rows[0].after.empty());
}

TEST(BinlogDecoder, CapturedGtidQueryAndXid) {
    Gtid g = decode_gtid(stripped(captured::gtid));
    EXPECT_EQ(g.domain, 0u);
    EXPECT_EQ(g.server_id, 1u);
    EXPECT_GT(g.sequence, 0u);
    QueryEvent q = decode_query(stripped(captured::query_create));
    EXPECT_NE(q.query.find("create table p"), std::string::npos) << q.query;
    EXPECT_EQ(decode_header(stripped(captured::xid)).type, EventType::Xid);
}

TEST(BinlogDecoder, ChecksumMismatchIsATypedError) {
    auto bad = captured::write_rows;
    bad[30] ^= 0x01;
    EXPECT_THROW(strip_checksum(bad, true), BinlogDecodeError);
    EXPECT_THROW(strip_checksum(Bytes(bad.data(), 10), true), BinlogDecodeError);
}

TEST(BinlogDecoder, EveryTruncationOfARealEventIsATypedError) {
    TableMap map = decode_table_map(stripped(captured::table_map));
    Bytes full = stripped(captured::write_rows);
    for (std::size_t n = 0; n < full.size(); ++n) {
        try {
            RowsEvent ev = decode_rows(full.first(n), map);
            // A cut exactly between rows is a valid shorter event; there is only one row here.
            EXPECT_TRUE(ev.rows.empty()) << n;
        } catch (const BinlogDecodeError&) {
        }
    }
    Bytes map_bytes = stripped(captured::table_map);
    for (std::size_t n = 0; n < map_bytes.size(); ++n) {
        try {
            decode_table_map(map_bytes.first(n));
        } catch (const BinlogDecodeError&) {
        }
    }
}

TEST(BinlogDecoder, HandBuiltIntegersOfEveryWidthSignedAndUnsigned) {
    // columns: TINY, SHORT, INT24, LONG, LONGLONG; all unsigned except INT24 (signedness bits
    // MSB first over numeric columns: 1 1 0 1 1 -> 0b11011000).
    auto map_event = table_map({1, 2, 9, 3, 8}, {}, {"a", "b", "c", "d", "e"}, 0b11011000);
    TableMap map = decode_table_map(map_event);
    EXPECT_TRUE(map.columns[0].is_unsigned);
    EXPECT_FALSE(map.columns[2].is_unsigned);
    EventBuilder rows(EventType::WriteRowsV1);
    rows.le(7, 6).le(1, 2).u8(5).u8(0x1F).u8(0x00);
    rows.le(0xFF, 1).le(0xFFFF, 2).le(0xFFFFFF, 3).le(0xFFFFFFFF, 4).le(0xFFFFFFFFFFFFFFFFull, 8);
    RowsEvent ev = decode_rows(rows.build(), map);
    ASSERT_EQ(ev.rows.size(), 1u);
    const auto& r = ev.rows[0].after;
    EXPECT_EQ(r[0].to_string(), "255");
    EXPECT_EQ(r[1].to_string(), "65535");
    EXPECT_EQ(r[2].to_string(), "-1");
    EXPECT_EQ(r[3].to_string(), "4294967295");
    EXPECT_EQ(r[4].to_string(), "18446744073709551615");
    EXPECT_EQ(r[4].as_int64(), std::nullopt);  // does not fit a key
}

TEST(BinlogDecoder, HandBuiltMinimalImageAndNulls) {
    // Two LONGLONG columns; the before image carries only column 0, the after image column 1 as NULL.
    TableMap map = decode_table_map(table_map({8, 8}, {}, {"id", "v"}));
    EventBuilder rows(EventType::UpdateRowsV1);
    rows.le(7, 6).le(1, 2).u8(2).u8(0b01).u8(0b10);
    rows.u8(0x00).le(42, 8);  // before: null bitmap over 1 present column, id = 42
    rows.u8(0x01);            // after: v is NULL
    RowsEvent ev = decode_rows(rows.build(), map);
    ASSERT_EQ(ev.rows.size(), 1u);
    EXPECT_EQ(ev.rows[0].before[0].as_int64(), 42);
    EXPECT_EQ(ev.rows[0].before[1].kind, Value::Kind::Absent);
    EXPECT_EQ(ev.rows[0].after[0].kind, Value::Kind::Absent);
    EXPECT_EQ(ev.rows[0].after[1].kind, Value::Kind::Null);
}

TEST(BinlogDecoder, HandBuiltDecimalsDatesAndStrings) {
    // DECIMAL(5,2), DATE, VARCHAR(300) (2-byte length), CHAR(10), ENUM (1 byte)
    TableMap map = decode_table_map(
        table_map({246, 10, 15, 254, 254}, {5, 2, 0x2C, 0x01, 0xFE, 10, 0xF7, 1}, {"dec", "d", "v", "c", "e"}));
    EventBuilder rows(EventType::WriteRowsV1);
    rows.le(7, 6).le(1, 2).u8(5).u8(0x1F).u8(0x00);
    // 123.45 -> int part 3 digits in 2 bytes (0x007B with the sign bit), frac 45 in 1 byte
    rows.be(0x807B, 2).u8(45);
    rows.le((2026u << 9) | (11u << 5) | 23u, 3);
    rows.le(3, 2).str("abc");
    rows.u8(2).str("hi");
    rows.u8(3);
    RowsEvent ev = decode_rows(rows.build(), map);
    const auto& r = ev.rows.at(0).after;
    EXPECT_EQ(r[0].to_string(), "123.45");
    EXPECT_EQ(r[1].to_string(), "2026-11-23");
    EXPECT_EQ(r[2].to_string(), "'abc'");
    EXPECT_EQ(r[3].to_string(), "'hi'");
    EXPECT_EQ(r[4].to_string(), "3");
}

TEST(BinlogDecoder, UnsupportedColumnTypeIsRefusedByName) {
    // 245 is MySQL's binary JSON: not something MariaDB writes, and not decoded.
    try {
        decode_table_map(table_map({8, 245}, {4}, {"id", "doc"}));
        FAIL() << "expected UnsupportedColumnError";
    } catch (const UnsupportedColumnError& e) {
        EXPECT_EQ(e.type_code(), 245);
        EXPECT_NE(std::string(e.what()).find("t.doc"), std::string::npos) << e.what();
    }
}

TEST(BinlogDecoder, ForgedCountsAndMismatchedMapsAreTypedErrors) {
    TableMap map = decode_table_map(table_map({8}, {}, {"id"}));
    EventBuilder wrong_id(EventType::WriteRowsV1);
    wrong_id.le(8, 6).le(1, 2).u8(1).u8(1).u8(0).le(1, 8);
    EXPECT_THROW(decode_rows(wrong_id.build(), map), BinlogDecodeError);
    EventBuilder wrong_count(EventType::WriteRowsV1);
    wrong_count.le(7, 6).le(1, 2).u8(3).u8(1).u8(0).le(1, 8);
    EXPECT_THROW(decode_rows(wrong_count.build(), map), BinlogDecodeError);
    EventBuilder empty_image(EventType::WriteRowsV1);
    empty_image.le(7, 6).le(1, 2).u8(1).u8(0).u8(0);  // no column present: zero-byte images
    EXPECT_THROW(decode_rows(empty_image.build(), map), BinlogDecodeError);
    EventBuilder huge(EventType::TableMap);
    huge.le(7, 6).le(0, 2).u8(0).u8(0).u8(0).u8(0).u8(0xFE).le(1ull << 40, 8);
    EXPECT_THROW(decode_table_map(huge.build()), BinlogDecodeError);
}

}  // namespace
}  // namespace lockstep::binlog
