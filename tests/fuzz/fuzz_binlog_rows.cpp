// libFuzzer target for the binlog decoder (invalidation/): any bytes must decode or throw a
// lockstep::Error (BinlogDecodeError, UnsupportedColumnError), never crash, hang or read out of
// bounds (run it under -fsanitize=fuzzer,address,undefined).
//
// Input: [u16 little-endian n][n bytes: a TABLE_MAP event][rest: a rows event], both without
// checksums. The table map is decoded first; when it is well-formed the rows event is decoded
// against it, with the table id forced equal so that the row-image code is reached.
//
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -I invalidation/include \
//     -I core/include tests/fuzz/fuzz_binlog_rows.cpp invalidation/src/binlog_event.cpp \
//     invalidation/src/row_image.cpp core/src/error.cpp -o fuzz_binlog_rows
#include <cstddef>
#include <cstdint>
#include <vector>

#include "lockstep/core/error.h"
#include "lockstep/invalidation/binlog_event.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace lockstep::binlog;
    if (size < 2) return 0;
    std::size_t n = data[0] | (static_cast<std::size_t>(data[1]) << 8);
    data += 2;
    size -= 2;
    if (n > size) n = size;
    Bytes map_bytes(data, n);
    Bytes rows_bytes(data + n, size - n);
    try {
        (void)decode_header(rows_bytes);
        (void)decode_gtid(rows_bytes);
    } catch (const lockstep::Error&) {
    }
    try {
        (void)decode_query(rows_bytes);
    } catch (const lockstep::Error&) {
    }
    try {
        TableMap map = decode_table_map(map_bytes);
        map.table_id = rows_event_table_id(rows_bytes);
        RowsEvent ev = decode_rows(rows_bytes, map);
        for (const auto& row : ev.rows) {
            for (const auto& v : row.before) (void)v.to_string();
            for (const auto& v : row.after) (void)v.to_string();
        }
    } catch (const lockstep::Error&) {
    }
    return 0;
}
