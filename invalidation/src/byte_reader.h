// ByteReader: a bounds-checked cursor over event bytes. Every read checks what is left and
// throws BinlogDecodeError naming what it was reading, so a truncated or hostile event is a typed
// error and never a read past the buffer (the fuzz target relies on this).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "lockstep/invalidation/binlog_errors.h"

namespace lockstep::binlog {

class ByteReader {
public:
    explicit ByteReader(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}

    std::size_t left() const noexcept { return bytes_.size() - pos_; }
    std::size_t position() const noexcept { return pos_; }
    bool at_end() const noexcept { return pos_ == bytes_.size(); }

    std::span<const std::uint8_t> take(std::size_t n, const char* what) {
        need(n, what);
        auto out = bytes_.subspan(pos_, n);
        pos_ += n;
        return out;
    }
    void skip(std::size_t n, const char* what) { take(n, what); }
    std::uint8_t u8(const char* what) { return take(1, what)[0]; }

    // Little-endian unsigned integer of n bytes (n <= 8).
    std::uint64_t le(std::size_t n, const char* what) {
        auto b = take(n, what);
        std::uint64_t v = 0;
        for (std::size_t i = n; i-- > 0;) v = (v << 8) | b[i];
        return v;
    }
    // Big-endian unsigned integer of n bytes (n <= 8): the fractional temporal formats.
    std::uint64_t be(std::size_t n, const char* what) {
        auto b = take(n, what);
        std::uint64_t v = 0;
        for (std::size_t i = 0; i < n; ++i) v = (v << 8) | b[i];
        return v;
    }
    // The protocol's length-encoded integer; 0xFB (NULL) and 0xFF are malformed here.
    std::uint64_t lenenc(const char* what) {
        std::uint8_t first = u8(what);
        if (first < 0xFB) return first;
        if (first == 0xFC) return le(2, what);
        if (first == 0xFD) return le(3, what);
        if (first == 0xFE) return le(8, what);
        throw BinlogDecodeError(std::string("binlog: bad length-encoded integer in ") + what);
    }
    std::string string(std::size_t n, const char* what) {
        auto b = take(n, what);
        return std::string(reinterpret_cast<const char*>(b.data()), b.size());
    }
    // A count that must fit in what is left (each counted item takes at least `min_size` bytes):
    // stops a forged count from driving a huge allocation.
    std::size_t count(std::uint64_t n, std::size_t min_size, const char* what) {
        if (min_size > 0 && n > left() / min_size) {
            throw BinlogDecodeError(std::string("binlog: count ") + std::to_string(n) + " too large for the event in " + what);
        }
        return static_cast<std::size_t>(n);
    }

private:
    void need(std::size_t n, const char* what) const {
        if (n > left()) {
            throw BinlogDecodeError(std::string("binlog: event truncated reading ") + what + " (need " +
                                    std::to_string(n) + " bytes, " + std::to_string(left()) + " left)");
        }
    }

    std::span<const std::uint8_t> bytes_;
    std::size_t pos_ = 0;
};

}  // namespace lockstep::binlog
